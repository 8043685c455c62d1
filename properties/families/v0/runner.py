"""The runner: executes operations of the vocabulary against a target, as an engine would, and
reports what happened (:class:`~models.families.v0.operations.Outcome`) and what the allocator now
shows (:class:`~models.families.v0.operations.Snapshot`).

It keeps the handle -> object bindings, drains copy-on-write pairs after every mutating step
(the engine does so every scheduling step), and logs every statement it ran so the reproducer
can print the program as plain Python.

It is also the boundary against targets that misbehave rather than break an invariant. Each of
these ends the program with one :class:`~models.core.invariants.Violation` (CRASH for an exception,
else :data:`MISBEHAVED`) whose message is one line, ``target NAME misbehaved (KIND): ...``:

- ``exception``: a call the suite only reads through (copy-on-write drain, admission counts,
  state reads, the factory) raised; an exception from the operation's own calls is the
  outcome, judged by the oracle (CRASH when no contract allows it);
- ``wrong type``: a value read back (counts, id lists, the swap mapping, hit rate, blocks, block
  ids, token lists, ...) is not of the API's type; checked before the oracle sees it;
- ``hang``: the step (its calls, the drain and the state reads) outlived the target's
  ``step_timeout``; see :class:`Watchdog`;
- ``mutated argument``: a call changed a list the suite passed (each call gets a fresh copy,
  compared afterwards);
- ``mutated result``: a list or mapping a call returned changed afterwards (checked at the end
  of the step and of the next one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from models.core.invariants import Invariant, Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.error_classes import builtin_classes
from models.families.v0.invariants import Family
from models.families.v0.operations import (
    DEVICES,
    ErrorKind,
    Op,
    Outcome,
    Snapshot,
    TableFree,
)
from properties.core.calls import Call, ListOf, Lit, Name, Stmt, eval_expr, render_expr
from properties.core.targets import Target
from properties.core.watchdog import Hang, StepTimeout, Watchdog
from properties.families.v0.adapter import (
    FamilyAdapter,
    Misbehaviour,
    Plan,
    checked_block,
    checked_blocks,
    shown,
)

#: The family of wrong types, hangs and mutated lists. Exceptions are always CRASH.
MISBEHAVED: Invariant = Family.TARGET

#: What a target call may raise and the runner records: anything but ``KeyboardInterrupt``
#: (and :class:`StepTimeout`, handled apart).
TARGET_ERRORS = (Exception, SystemExit, GeneratorExit)


#: How many steps a returned list or mapping is watched for later changes.
RETURNED_WINDOW = 8

#: Programs whose last step timed out, so replaying them (Hypothesis's shrinking and final
#: replay) fails the same way at once instead of depending on timing again.
_HUNG: dict[Any, str] = {}  # program -> the call that hung


@dataclass(slots=True)
class Step:
    """One executed operation: the statements run (for reproducers) and the results."""

    op: Op
    stmts: list[Stmt]
    outcome: Outcome
    seconds: float


@dataclass
class Runner:
    """Drives one fresh allocator of ``target`` shaped by ``config``."""

    target: Target
    config: Config
    adapter: FamilyAdapter = field(init=False)
    env: dict[str, Any] = field(init=False)
    blocks: dict[int, Any] = field(default_factory=dict)  # live block handles
    tables: dict[int, Any] = field(default_factory=dict)  # live table handles
    table_extra: dict[int, ops.Extra] = field(default_factory=dict)
    next_block: int = 0
    next_table: int = 0
    log: list[Step] = field(default_factory=list)
    watchdog: Watchdog = field(init=False)
    _doing: Any = field(init=False, default="")  # the call in progress (a Stmt or a label)
    _returned: list[tuple[str, int, Any, Any]] = field(init=False, default_factory=list)
    _fresh: list[tuple[str, int, Any, Any]] = field(init=False, default_factory=list)
    _stepping: bool = field(init=False, default=False)  # the watchdog is armed by execute
    #: the block objects the live tables held at the last snapshot, by ``id()``, with the id
    #: each showed then
    _table_objects: dict[int, tuple[Any, int | None]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.watchdog = Watchdog(self.target.step_timeout)
        c = self.config
        self._doing = (f"the factory {self.target.spec}({self.target.allocator_type!r}, "
                       f"{c.num_gpu_blocks}, {c.num_cpu_blocks}, {c.block_size})")
        try:
            self.watchdog.arm()
            try:
                self.adapter = self.target.adapter(self.config)
                self.env = self.adapter.env()
                return
            finally:
                self.watchdog.disarm()
        except StepTimeout:
            pass  # raised below, without an exception context (see ``execute``)
        except Misbehaviour as exc:
            raise self._misbehaved(exc.kind, exc.detail) from None
        except TARGET_ERRORS as exc:
            raise self._misbehaved("exception", f"{self._doing} raised "
                                                f"{type(exc).__name__}: {exc}") from None
        raise self._misbehaved("hang", f"creating the allocator exceeded {self._limit()} "
                                       f"(in {self._doing})")

    def _misbehaved(self, kind: str, detail: str) -> Violation:
        """An exception is CRASH (an error no contract allows); the rest :data:`MISBEHAVED`, a
        hang as a :class:`Hang`."""
        family = Family.CRASH if kind == "exception" else MISBEHAVED
        cls = Hang if kind == "hang" else Violation
        return cls(family, f"target {self.target.name} misbehaved ({kind}): {detail}")

    def _limit(self) -> str:
        return f"{self.target.step_timeout:g} s"

    def _label(self) -> str:
        doing = self._doing
        if isinstance(doing, Stmt):
            expr = doing.expr
            return render_expr(expr.func) if isinstance(expr, Call) else render_expr(expr)
        return str(doing)

    # ------------------------------------------------------------------ execution

    def execute(self, op: Op) -> tuple[Outcome, Snapshot]:
        """Run ``op``; target errors become the outcome. Raises ``Violation`` when the target
        misbehaved (see the module docstring) or cannot even show its state afterwards."""
        index = len(self.log)
        plan = self.adapter.plan(op, self.table_extra)  # Unsupported propagates: a caps bug
        # A timeout is raised outside any ``except`` (no exception context) from one line, and
        # a program that hung before fails again at once: Hypothesis sees the same failure on
        # every replay, never a flaky one.
        key = self._hang_key(op, index) if _HUNG else None
        hung_in = _HUNG.get(key) if key is not None else None
        done = [0]  # statements run so far, for the log of a step that ended early
        if hung_in is None:
            try:
                self.watchdog.arm()
                self._stepping = True
                try:
                    return self._execute(op, plan, index, done)
                finally:
                    self._stepping = False
                    self.watchdog.disarm()
            except StepTimeout:
                hung_in = self._label()
                key = self._hang_key(op, index)
                if key is not None:
                    _HUNG[key] = hung_in
            except Misbehaviour as exc:
                self._log_failed(op, plan.stmts[: done[0] + 1], str(exc), index)
                raise self._misbehaved(exc.kind, exc.detail).at(op, index) from None
        self._log_failed(op, plan.stmts[: done[0] + 1], "timed out", index)
        raise self._misbehaved("hang", f"step {index} {op.kind} exceeded {self._limit()} "
                                       f"(in {hung_in})").at(op, index)

    def _hang_key(self, op: Op, index: int) -> Any:
        """The program up to ``op`` (step ``index``) on this target and config, if hashable."""
        t = self.target
        key = (t.spec, t.allocator_type, repr(t.factory_kwargs), self.config,
               tuple(step.op for step in self.log[:index]), op)
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def _log_failed(self, op: Op, stmts: list[Stmt], detail: str, index: int) -> None:
        """Log the step that ended early (once), so the reproducer shows the calls made."""
        if len(self.log) > index:
            return
        self.log.append(Step(op, list(stmts), Outcome(error=ErrorKind.UNEXPECTED,
                                                      detail=detail), 0.0))

    def _execute(self, op: Op, plan: Plan, index: int,
                 done: list[int]) -> tuple[Outcome, Snapshot]:
        before_blocks = set(self.blocks)
        before_tables = set(self.tables)
        # stale ids: the id a freed block held, for later ``MarkStaleIds`` plans
        freeing = self.blocks.get(op.block) if isinstance(op, ops.Free) else None
        held = getattr(freeing, "block_id", None) if freeing is not None else None
        results: list[Any] = []
        error: BaseException | None = None
        self._fresh = []
        started = time.perf_counter()
        for stmt in plan.stmts:
            self._doing = stmt
            try:
                results.append(self._run(stmt, index))
            except Misbehaviour:
                raise
            except TARGET_ERRORS as exc:  # the target's failure is data, classified below
                error = exc
                break
            done[0] = len(results)
        seconds = time.perf_counter() - started
        logged = list(plan.stmts if error is None else plan.stmts[: len(results) + 1])
        outcome = self._outcome(op, plan, results, error, logged)
        if isinstance(op, ops.Free) and outcome.error is None and type(held) is int:
            self.adapter.freed_ids[op.block] = held  # stale ids
        self.env.pop("new_table", None)
        self._remember_table_extra(op, outcome)
        self.log.append(Step(op, logged, outcome, seconds))
        try:
            snapshot = self.snapshot(before_blocks, before_tables)
        except Violation as violation:
            raise violation.at(op, index) from None
        self._check_returned()
        return outcome, snapshot

    def _run(self, stmt: Stmt, index: int) -> Any:
        """``calls.run`` with guarded arguments: each call gets fresh copies of the suite's
        lists (list literals and ``ListOf``), compared with the originals afterwards; a tuple
        literal is an in-out argument, passed as a fresh list and not compared. Lists and
        mappings it returns are remembered for :meth:`_check_returned`."""
        expr = stmt.expr
        result = self._call(expr) if isinstance(expr, Call) else eval_expr(expr, self.env)
        if type(result) is list or type(result) is dict:
            label = render_expr(expr.func) if isinstance(expr, Call) else render_expr(expr)
            self._fresh.append((label, index, result, result.copy()))
        if stmt.bind is not None:
            self.env[stmt.bind] = result
        if stmt.unpack:
            items = list(result)
            if len(items) != len(stmt.unpack):
                raise ValueError(f"expected {len(stmt.unpack)} results, got {len(items)}")
            self.env.update(zip(stmt.unpack, items, strict=True))
        return result

    def _call(self, expr: Call) -> Any:
        env = self.env
        func = eval_expr(expr.func, env)
        guarded: list[tuple[Any, Any]] = []
        arg = self._arg
        args = [arg(a, guarded) for a in expr.args]
        result = func(*args, **{k: arg(v, guarded) for k, v in expr.kwargs}) if expr.kwargs \
            else func(*args)
        for passed, original in guarded:
            if passed != original:
                raise Misbehaviour("mutated argument", f"{render_expr(expr.func)} changed the "
                                   f"list it was passed from {shown(original)} to "
                                   f"{shown(passed)}")
        return result

    def _arg(self, expr: Any, guarded: list[tuple[Any, Any]]) -> Any:
        kind = type(expr)
        if kind is Name:  # the commonest argument: a handle or a name of the environment
            return self.env[expr.id]
        if kind is Lit and type(expr.value) is not list and type(expr.value) is not tuple:
            return expr.value
        if isinstance(expr, Lit):
            value = expr.value
            if type(value) is list:
                fresh = [list(v) for v in value] if value and type(value[0]) is list \
                    else list(value)
                guarded.append((fresh, value))
                return fresh
            return list(value) if isinstance(value, tuple) else value
        if isinstance(expr, ListOf):
            items = [eval_expr(i, self.env) for i in expr.items]
            guarded.append((items, items.copy()))
            return items
        if isinstance(expr, Call):
            return self._call(expr)
        return eval_expr(expr, self.env)

    def _check_returned(self) -> None:
        """Lists and mappings the target returned in the last :data:`RETURNED_WINDOW` steps
        (this one included) must be unchanged."""
        for label, step, obj, copy in self._fresh:
            if obj != copy:
                raise Misbehaviour("mutated result", f"the {type(obj).__name__} {label} "
                                   f"returned at step {step} changed within the step from "
                                   f"{shown(copy)} to {shown(obj)}")
        for label, step, obj, copy in self._returned:
            if obj != copy:
                raise Misbehaviour("mutated result", f"the {type(obj).__name__} {label} "
                                   f"returned at step {step} changed afterwards from "
                                   f"{shown(copy)} to {shown(obj)}")
        oldest = len(self.log) - RETURNED_WINDOW
        kept = [entry for entry in self._returned if entry[1] >= oldest]
        self._returned, self._fresh = kept + self._fresh, []

    def _outcome(self, op: Op, plan: Plan, results: list[Any], error: BaseException | None,
                 logged: list[Stmt]) -> Outcome:
        if error is not None:
            kind = self.adapter.classify(error)
            admitted = None
            if plan.admission is not None and len(results) >= len(plan.stmts) - 2:
                admitted = self._checked(plan.admission, results)
            return Outcome(error=kind, detail=f"{type(error).__name__}: {error}",
                           admitted=admitted, cows=self._drain(op),
                           builtins=builtin_classes(error))
        new_blocks = self._bind_blocks(op, plan, results, logged)
        new_table = self._bind_table(plan, logged)
        self._forget(op)
        value = self._checked(plan.value, results)
        admitted = self._checked(plan.admission, results) if plan.admission is not None \
            else None
        return Outcome(value=value, new_blocks=new_blocks, new_table=new_table,
                       cows=self._drain(op), admitted=admitted)

    def _checked(self, read: Any, results: list[Any]) -> Any:
        """A plan's reading of its results (type-checked by the adapter's checkers)."""
        try:
            return read(results)
        except Misbehaviour:
            raise
        except TARGET_ERRORS as exc:  # e.g. a result whose own methods raise when read
            raise Misbehaviour("wrong type", f"{self._label()}: reading its result raised "
                               f"{type(exc).__name__}: {exc}") from None

    def _drain(self, op: Op) -> tuple[tuple[int, int], ...]:
        if isinstance(op, ops.ClearCopyOnWrites) or not op.mutates:
            return ()
        self._doing = "alloc.clear_copy_on_writes"
        try:
            cows = self.adapter.drain_cows()
            raw = self.adapter.last_drained
            if type(raw) is list:
                self._fresh.append(("alloc.clear_copy_on_writes (drain)", len(self.log), raw,
                                    raw.copy()))
            return cows
        except Misbehaviour:
            raise
        except TARGET_ERRORS as exc:
            raise Misbehaviour("exception", f"alloc.clear_copy_on_writes() (the engine's drain "
                               f"after {op.kind}) raised {type(exc).__name__}: {exc}") from None

    def _bind_blocks(self, op: Op, plan: Plan, results: list[Any],
                     logged: list[Stmt]) -> tuple[int, ...]:
        if plan.creates == 0:
            return ()
        made = results[-1]
        what = self._label()
        objs = [checked_block(made, what)] if plan.single else list(checked_blocks(made, what))
        handles = tuple(range(self.next_block, self.next_block + len(objs)))
        self.next_block += len(objs)
        self.blocks.update(zip(handles, objs, strict=True))
        self.env.update({f"b{h}": obj for h, obj in zip(handles, objs, strict=True)})
        last = logged[-1]
        if plan.single:
            logged[-1] = Stmt(last.expr, bind=f"b{handles[0]}", comment=last.comment)
        else:
            logged[-1] = Stmt(last.expr, unpack=tuple(f"b{h}" for h in handles),
                              comment=last.comment)
        return handles

    def _bind_table(self, plan: Plan, logged: list[Stmt]) -> int | None:
        if plan.creates_table is None:
            return None
        handle = self.next_table
        self.next_table += 1
        obj = self.env.pop(plan.creates_table)
        self.tables[handle] = obj
        self.env[f"t{handle}"] = obj
        logged.append(Stmt(Name(plan.creates_table), bind=f"t{handle}"))
        return handle

    def _forget(self, op: Op) -> None:
        """Drop handles a successful op ended (their objects may be reused by the pool)."""
        if isinstance(op, ops.Free):
            self.blocks.pop(op.block, None)
        elif isinstance(op, TableFree):
            self.tables.pop(op.table, None)

    def _remember_table_extra(self, op: Op, outcome: Outcome) -> None:
        """Tables keep the extra_hash they were allocated with (forks inherit it)."""
        if outcome.new_table is None:
            return
        if isinstance(op, ops.TableAllocate):
            self.table_extra[outcome.new_table] = op.extra_hash
        elif isinstance(op, ops.TableFork):
            self.table_extra[outcome.new_table] = self.table_extra.get(op.table)

    # ------------------------------------------------------------------ observation

    def snapshot(self, also_blocks: set[int] = frozenset(),  # type: ignore[assignment]
                 also_tables: set[int] = frozenset()) -> Snapshot:  # type: ignore[assignment]
        """What the allocator shows now, for every live handle (plus the ones just ended).

        Raises ``Violation`` when the target cannot show it: TABLE for a ``RecursionError`` (a
        cyclic chain), CRASH for another exception, :data:`MISBEHAVED` for a wrong type or a
        hang, naming what was being read."""
        self._doing = "reading the allocator's state"
        try:
            if self._stepping:
                return self._snapshot(also_blocks, also_tables)
            self.watchdog.arm()
            try:
                return self._snapshot(also_blocks, also_tables)
            finally:
                self.watchdog.disarm()
        except StepTimeout:
            if self._stepping:
                raise  # the step's own limit: ``execute`` reports it
        except Misbehaviour as exc:
            where = "" if self._label() in exc.detail else f" (reading {self._label()})"
            raise self._misbehaved(exc.kind, exc.detail + where) from None
        except TARGET_ERRORS as exc:
            family = Family.TABLE if isinstance(exc, RecursionError) else Family.CRASH
            raise Violation(family, f"reading the allocator's state ({self._doing}) raised "
                                    f"{type(exc).__name__}: {exc}") from None
        raise self._misbehaved("hang", f"reading the allocator's state exceeded "
                                       f"{self._limit()} (in {self._label()})")

    def _snapshot(self, also_blocks: set[int], also_tables: set[int]) -> Snapshot:
        a = self.adapter
        blocks: dict[int, int | None] = {}
        tokens: dict[int, tuple[int, ...]] = {}
        hashes: dict[int, int | None] = {}
        extras: dict[int, int | None] | None = {} if a.has_extra_hash else None
        totals: dict[int, int] | None = {} if self.target.caps.prefix_caching else None
        live = self.blocks
        block_state, block_extra, block_total = a.block_state, a.block_extra, a.block_total
        for h in sorted(live.keys() | also_blocks if also_blocks else live):
            obj = live.get(h)
            if obj is None:
                blocks[h] = None
                continue
            # What is being read is named only when a read fails (``snapshot`` reports it):
            # formatting it for every block of every step cost more than the reads.
            reading = ""
            try:
                blocks[h], tokens[h], hashes[h] = block_state(obj)
                if extras is not None:
                    reading = ".extra_hash"
                    extras[h] = block_extra(obj)
                if totals is not None:
                    reading = ".num_tokens_total"
                    totals[h] = block_total(obj)
            except BaseException:
                self._doing = f"block b{h}{reading}"
                raise
        tables: dict[int, tuple[int | None, ...]] = {}
        table_tokens: dict[int, tuple[int, ...]] = {}
        table_totals: dict[int, tuple[int | None, ...]] | None = (
            {} if self.target.caps.prefix_caching else None)
        live_tables = self.tables
        held: dict[int, tuple[Any, int | None]] = {}
        for t in sorted(live_tables.keys() | also_tables if also_tables else live_tables):
            tobj = live_tables.get(t)
            if tobj is None:
                tables[t] = ()
                continue
            reading = ""  # named only when a read fails, as for blocks
            try:
                tables[t], table_tokens[t] = a.table_state(tobj)
                objects = tobj.blocks
                held.update(zip(map(id, objects), zip(objects, tables[t], strict=True),
                                strict=True))
                if table_totals is not None:
                    reading = ": blocks' num_tokens_total"
                    shown_totals = a.table_totals(tobj)
                    if shown_totals is not None:
                        table_totals[t] = shown_totals
            except BaseException:
                self._doing = f"table t{t}{reading}"
                raise
        dropped = self._dropped_table_blocks(held)
        self._doing = "the allocator's private state"
        seen = a.introspect() if self.target.caps.introspection else None
        self._doing = "alloc.get_num_free_blocks"
        free = {dev: a.free_count(dev) for dev in DEVICES}
        evictor = self.env.get("evictor")  # evictor level: the standalone evictor, once built
        self._doing = "evictor.free_table"
        shown_evictor = None if evictor is None else a.evictor_state(evictor)
        counter = self.env.get("refcounter")  # refcount level: the standalone counter, once built
        self._doing = "refcounter.get, cow_tracker.pending"
        shown_refcount = None if counter is None else a.refcount_state(
            counter, self.env.get("cow_tracker"))
        self._doing = "metric_data's hit-rate window fields"
        metric = a.metric_windows()
        self._doing = "reading the allocator's state"
        if seen is None:
            return Snapshot(free, blocks, tokens, hashes, tables, table_tokens,
                            evictor=shown_evictor, refcount=shown_refcount, metric=metric,
                            block_extras=extras, block_totals=totals,
                            table_totals=table_totals or None, dropped_ids=dropped)
        return Snapshot(free, blocks, tokens, hashes, tables, table_tokens, seen.cached,
                        seen.evictable, seen.refcounts, evictor=shown_evictor,
                        refcount=shown_refcount, metric=metric, block_extras=extras,
                        block_totals=totals, table_totals=table_totals or None,
                        evictable_ranks=seen.ranks, access_times=seen.access,
                        dropped_ids=dropped)

    def _dropped_table_blocks(self, held: dict[int, tuple[Any, int | None]],
                              ) -> tuple[int | None, ...]:
        """The ids still shown by block objects some table held at the last snapshot and none
        holds now (nor a block handle), where an object shows the very id it had then: a table
        free or a window drop let go of them, so each must have dropped its id (docs/API.md: a
        freed block's ``block_id`` is ``None``), or the allocator has reused the object for
        another id. ``held``: the live tables' objects now, with their ids."""
        before, self._table_objects = self._table_objects, held
        if not before:
            return ()
        handles = {id(b) for b in self.blocks.values()}
        self._doing = "block_id of a block a table let go of"
        block_id = self.adapter.block_id
        stale: list[int | None] = []
        for key, (obj, was) in before.items():
            if key not in held and key not in handles and was is not None:
                shown = block_id(obj)
                if shown == was:
                    stale.append(shown)
        return tuple(stale)
