"""The runner: executes operations of the vocabulary against a target, as an engine would, and
reports what happened (:class:`~models.operations.Outcome`) and what the allocator now shows
(:class:`~models.operations.Snapshot`).

It keeps the handle -> object bindings, drains copy-on-write pairs after every mutating step
(the engine does so every scheduling step), and logs every statement it ran so the reproducer
can print the program as plain Python.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from models import operations as ops
from models.capabilities import Config
from models.families import Family, Violation
from models.operations import (
    Dev,
    ErrorKind,
    Op,
    Outcome,
    Snapshot,
    TableFree,
)
from properties.adapters import FamilyAdapter, Plan
from properties.calls import Name, Stmt, run
from properties.targets import Target


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
    table_extra: dict[int, int | None] = field(default_factory=dict)
    next_block: int = 0
    next_table: int = 0
    log: list[Step] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.adapter = self.target.adapter(self.config)
        self.env = self.adapter.env()

    # ------------------------------------------------------------------ execution

    def execute(self, op: Op) -> tuple[Outcome, Snapshot]:
        """Run ``op``; target errors become the outcome. Raises ``Violation`` only when the
        allocator cannot even show its state afterwards."""
        before_blocks = set(self.blocks)
        before_tables = set(self.tables)
        plan = self.adapter.plan(op, self.table_extra)  # Unsupported propagates: a caps bug
        results: list[Any] = []
        error: BaseException | None = None
        started = time.perf_counter()
        for stmt in plan.stmts:
            try:
                results.append(run(stmt, self.env))
            except Exception as exc:  # the target's failure is data, classified below
                error = exc
                break
        seconds = time.perf_counter() - started
        logged = list(plan.stmts if error is None else plan.stmts[: len(results) + 1])
        outcome = self._outcome(op, plan, results, error, logged)
        self.env.pop("new_table", None)
        self._remember_table_extra(op, outcome)
        self.log.append(Step(op, logged, outcome, seconds))
        try:
            snapshot = self.snapshot(before_blocks, before_tables)
        except Exception as exc:  # the target cannot even show its state (e.g. a cyclic chain)
            family = Family.TABLE if isinstance(exc, RecursionError) else Family.CRASH
            raise Violation(family, f"reading the allocator's state raised "
                                    f"{type(exc).__name__}: {exc}").at(op, len(self.log) - 1) \
                from None
        return outcome, snapshot

    def _outcome(self, op: Op, plan: Plan, results: list[Any], error: BaseException | None,
                 logged: list[Stmt]) -> Outcome:
        if error is not None:
            kind = self.adapter.classify(error)
            admitted = None
            if plan.admission is not None and len(results) >= len(plan.stmts) - 2:
                admitted = plan.admission(results)
            return Outcome(error=kind, detail=f"{type(error).__name__}: {error}",
                           admitted=admitted, cows=self._drain(op))
        new_blocks = self._bind_blocks(op, plan, results, logged)
        new_table = self._bind_table(plan, logged)
        self._forget(op)
        try:
            value = plan.value(results)
        except Exception as exc:  # a return value of the wrong type or shape
            return Outcome(error=ErrorKind.UNEXPECTED,
                           detail=f"bad return value: {type(exc).__name__}: {exc}")
        admitted = plan.admission(results) if plan.admission is not None else None
        return Outcome(value=value, new_blocks=new_blocks, new_table=new_table,
                       cows=self._drain(op), admitted=admitted)

    def _drain(self, op: Op) -> tuple[tuple[int, int], ...]:
        if isinstance(op, ops.ClearCopyOnWrites) or not op.mutates:
            return ()
        return self.adapter.drain_cows()

    def _bind_blocks(self, op: Op, plan: Plan, results: list[Any],
                     logged: list[Stmt]) -> tuple[int, ...]:
        if plan.creates == 0:
            return ()
        made = results[-1]
        objs = [made] if plan.single else list(made)
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
        """What the allocator shows now, for every live handle (plus the ones just ended)."""
        a = self.adapter
        blocks: dict[int, int | None] = {}
        tokens: dict[int, tuple[int, ...]] = {}
        hashes: dict[int, int | None] = {}
        for h in sorted(set(self.blocks) | also_blocks):
            obj = self.blocks.get(h)
            if obj is None:
                blocks[h] = None
                continue
            blocks[h], tokens[h], hashes[h] = a.block_state(obj)
        tables: dict[int, tuple[int | None, ...]] = {}
        table_tokens: dict[int, tuple[int, ...]] = {}
        for t in sorted(set(self.tables) | also_tables):
            tobj = self.tables.get(t)
            if tobj is None:
                tables[t] = ()
                continue
            tables[t], table_tokens[t] = a.table_state(tobj)
        seen = a.introspect() if self.target.caps.introspection else None
        free = {dev: a.free_count(dev) for dev in Dev}
        if seen is None:
            return Snapshot(free, blocks, tokens, hashes, tables, table_tokens)
        cached, evictable, refcounts = seen
        return Snapshot(free, blocks, tokens, hashes, tables, table_tokens, cached, evictable,
                        refcounts)

