"""The oracle: the executable model plus the shadow KV memory, judging one step at a time.

``Oracle(config)``; ``initial_check(snapshot)`` right after the allocator is created; then
``step(op, outcome, after)`` for every executed operation. It raises :class:`Violation` (the
target broke an invariant family), :class:`OutOfContract` (the program left the contract, or
a target without atomicity failed so its state is unknown) or :class:`Inconclusive` (never a
false alarm: see below).

When KV is written (``models.families.v0.computed_claims``): the shadow memory learns at every
``mark_blocks_as_computed`` which ids hold computed KV, and every answer that lets the engine
skip work must name a prefix of the blocks asked about whose ids hold exactly that KV.

Refinement, not prediction: the model follows every choice the contract leaves open as the
target shows it. Choices the target never shows (an eviction victim whose id was given back by a
promotion within the same ``TableAppend``) are explored: the oracle keeps every model state
consistent with everything seen so far (at most ``MAX_WORLDS``), drops those a later snapshot
contradicts, and reports a violation only when none survives. Introspection (the evictable
set) usually settles such a choice in the same step. If the search ever had to be pruned and
nothing survives, the step raises :class:`Inconclusive` instead of a violation.

A step costs O(what it touches) in the model plus the snapshot comparison (linear in the
snapshot); the shadow memory only re-reads blocks whose id or slots changed.
"""

from __future__ import annotations

from models.core.choice import Chooser
from models.core.invariants import Violation
from models.families.v0 import (  # stale ids
    computed_claims,  # when KV is written
    error_classes,
)
from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.capabilities import Config
from models.families.v0.checks import check_snapshot
from models.families.v0.content import ContentTrie
from models.families.v0.context import Context
from models.families.v0.contract import Inconclusive, OutOfContract, misuse_or_out, shortfall
from models.families.v0.evictor_model import EvictorModel  # evictor level
from models.families.v0.invariants import Family
from models.families.v0.operations import ErrorKind, Op, Outcome, Snapshot
from models.families.v0.ops.free import record_free  # stale ids
from models.families.v0.queries import Queries
from models.families.v0.refcount_model import RefcountModel  # refcount level
from models.families.v0.shadow_memory import ShadowMemory

__all__ = ["Inconclusive", "Oracle", "OutOfContract"]

F = Family
MAX_WORLDS = 16
MAX_PATHS = 16

# When several families fire on one step, the most specific one is reported.
PRIORITY = (F.CRASH, F.ATOMIC, F.HASH, F.COW, F.CONTENT, F.SWAP, F.LRU, F.CACHE, F.COMPUTED,
            F.HIT, F.RC, F.LEAK, F.FREE, F.TABLE)

# Every operation holds its own contract, cost and step and says what the oracle treats
# apart (models.families.v0.ops.base.Op); the evictor and refcount levels have their own
# component models.
CRASHES = (ErrorKind.UNEXPECTED, ErrorKind.ASSERTION)


def _pair_set(pairs: object) -> list[str]:
    """Copy-on-write pairs as a sorted list (the order within one operation is free)."""
    return sorted(repr(tuple(p)) if isinstance(p, list | tuple) else repr(p)
                  for p in (pairs if isinstance(pairs, list | tuple) else [pairs]))


def most_specific(found: list[Violation]) -> Violation:
    """Root causes first, then the most specific family."""
    return min(found, key=lambda v: (not getattr(v, "root_cause", False),
                                     PRIORITY.index(v.family)))


class Oracle(Queries):
    """Judges a program step by step (see the module docstring)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.caps = config.caps
        self.trie = ContentTrie()
        self.worlds: list[Model] = [Model(config, self.trie)]
        self.shadow = ShadowMemory(config.block_size,
                                   config.num_gpu_blocks + config.num_cpu_blocks)
        self.pruned = False
        self.steps = 0
        self.evictor = EvictorModel(config.caps)  # evictor level: the standalone evictor
        self.refcount = RefcountModel(config.caps)  # refcount level: counter + CoW tracker

    # ------------------------------------------------------------------ judging

    def initial_check(self, snapshot: Snapshot) -> None:
        """A fresh allocator: everything free, nothing cached, no holders."""
        c = Context(ops.ClearCopyOnWrites(), Outcome(), snapshot, Chooser())
        self.model.ctx = c
        check_snapshot(self.model, c)
        self.model.ctx = None
        if c.found:
            raise most_specific(c.found)

    def step(self, op: Op, outcome: Outcome, after: Snapshot) -> None:
        if isinstance(op, ops.EVICTOR_OPS):  # evictor level: semantics in evictor_model
            self._component_step(self.evictor.step(op, outcome, after.evictor))
            return
        if isinstance(op, ops.REFCOUNT_OPS):  # refcount level: models.families.v0.refcount_model
            self._component_step(self.refcount.step(op, outcome, after.refcount))
            return
        misuse = misuse_or_out(self.model, op)
        if misuse is not None and not self.caps.typed_errors:
            raise OutOfContract(f"{op.kind}: misuse ({misuse}) fed to a target without typed "
                                "errors")
        # stale ids: the id a freed handle held (live handles' ids agree in every world)
        freed = op.freed_block() if misuse is None else None
        held = self.model.blocks[freed].id if freed is not None else None
        results: list[tuple[Model, list[Violation], bool]] = []
        for world in self.worlds:
            if self._may_branch(world, op, outcome, misuse):
                results += self._explore(world, op, outcome, after, misuse)
            else:
                results.append(self._judge(world, op, outcome, after, misuse, Chooser()))
        # The data plane follows the target alone; the block layout (which keys moved and
        # wrote what) is the same in every world that applied the step.
        applied = next((w for w, found, _ in results if not found), results[0][0])
        found_shadow = self._shadow(op, outcome, applied) \
            if outcome.error is None and misuse is None else []
        for world, _, _ in results:
            if world.ctx is not None:
                for key in world.ctx.forget:
                    world.blocks.forget(key)
            world.ctx = None
        survivors = [w for w, found, _ in results if not found and not found_shadow]
        self.steps += 1
        if any(out for _, _, out in results):
            raise OutOfContract(f"{op.kind}: a target without atomicity failed; its state is "
                                "no longer known")
        if survivors:
            if len(survivors) > MAX_WORLDS:
                self.pruned = True
            self.worlds = survivors[:MAX_WORLDS]
            if freed is not None and held is not None and outcome.error is None:
                for world in self.worlds:
                    record_free(world, freed, held)
            return
        if self.pruned:
            raise Inconclusive(f"{op.kind}: no model state explains the target, but the search "
                               "over hidden choices was pruned")
        raise most_specific(results[0][1] + found_shadow)

    def _component_step(self, found: list[Violation]) -> None:
        """A step of the evictor or refcount level, judged by its component model."""
        self.steps += 1
        if found:
            raise most_specific(found)

    def _judge(self, m: Model, op: Op, outcome: Outcome, after: Snapshot, misuse: str | None,
               chooser: Chooser) -> tuple[Model, list[Violation], bool]:
        c = m.ctx = Context(op, outcome, after, chooser)
        self._note_hints(c)
        err = outcome.error
        if misuse is not None:
            fam = op.misuse_family
            if err is None:
                c.flag(fam, f"misuse accepted without an error: {misuse}")
            elif err is not ErrorKind.MISUSE:
                c.flag(F.CRASH if err in CRASHES else fam, f"misuse ({misuse}) raised "
                       f"{err.value}, not a typed misuse error: {outcome.detail}")
            elif (wrong := error_classes.wrong_class(op, outcome, misuse)) is not None:
                c.flag(F.CRASH, wrong)  # an engine's ``except`` of the pinned class misses it
            elif not self.caps.atomic:
                return m, [], True
            else:
                self._unchanged(m, c)
            return m, c.found, False
        short = shortfall(m, op)
        if err is not None:
            if short and err is ErrorKind.NO_FREE_BLOCKS:
                if (wrong := error_classes.wrong_class(op, outcome)) is not None:
                    c.flag(F.CRASH, wrong)
                if op.admitted_first and outcome.admitted:
                    c.flag(F.FREE, "the allocator's own admission said the swap fits, then it "
                           "failed with NoFreeBlocksError")
                elif not self.caps.atomic:
                    return m, [], True
                self._unchanged(m, c)
            elif short:
                c.flag(F.CRASH if err in CRASHES else F.FREE, f"{op.kind} must fail with "
                       f"NoFreeBlocksError, raised {err.value}: {outcome.detail}")
            else:
                fam = op.crash_family if err in CRASHES else {
                    ErrorKind.NO_FREE_BLOCKS: F.FREE, ErrorKind.MISUSE: op.misuse_family,
                }.get(err, F.CRASH)
                c.flag(fam, f"{op.kind} must succeed, raised {err.value}: {outcome.detail}")
            return m, c.found, False
        if short:
            op.explain_success(m)
            c.flag(F.FREE, f"{op.kind} needs more free blocks than there are, yet succeeded")
            return m, c.found, False
        op.step(m)
        if op.mutates and op.records_cows and list(outcome.cows) != c.expected_cows \
                and _pair_set(outcome.cows) != _pair_set(c.expected_cows):
            # One operation's pairs may come in any order: their destinations are fresh,
            # distinct ids, so the engine's batch copy does not depend on it.
            c.flag(F.COW, "copy-on-write pairs", expected=c.expected_cows,
                   observed=list(outcome.cows))
        check_snapshot(m, c)
        return m, c.found, False

    def _unchanged(self, m: Model, c: Context) -> None:
        c.override = F.ATOMIC
        if c.outcome.cows:
            c.flag(F.COW, "copy-on-write pairs recorded by a failed operation",
                   expected=[], observed=list(c.outcome.cows))
        check_snapshot(m, c)

    @staticmethod
    def _note_hints(c: Context) -> None:
        after, op = c.after, c.op
        handles = [*c.outcome.new_blocks, *getattr(op, "blocks", ()),
                   *(h for h in (getattr(op, "block", None),) if h is not None)]
        c.note_hints([after.blocks.get(h) for h in handles])
        for t in (getattr(op, "table", None), c.outcome.new_table):
            if t is not None:
                c.note_hints(after.tables.get(t, ()))
        if op.value_names_ids:
            c.note_hints(c.outcome.value)

    # ------------------------------------------------------------------ hidden choices

    def _may_branch(self, m: Model, op: Op, outcome: Outcome, misuse: str | None) -> bool:
        """Only a valid, successful call can hide a choice (``Op.hides_choices``: a
        ``TableAppend`` may hide an eviction victim)."""
        return outcome.error is None and misuse is None and op.hides_choices(m)

    @staticmethod
    def _clone(m: Model) -> Model:
        m.ctx = None
        return m.clone()

    def _explore(self, m: Model, op: Op, outcome: Outcome, after: Snapshot,
                 misuse: str | None) -> list[tuple[Model, list[Violation], bool]]:
        base = self._clone(m)
        out: list[tuple[Model, list[Violation], bool]] = []
        stack: list[tuple[int, ...]] = [()]
        while stack:
            path = stack.pop()
            if len(out) >= MAX_PATHS:
                self.pruned = True
                break
            world = m if not out else self._clone(base)
            chooser = Chooser(path, explore=True)
            out.append(self._judge(world, op, outcome, after, misuse, chooser))
            self.pruned |= chooser.pruned
            stack.extend(reversed(chooser.alternatives()))
        return out

    # ------------------------------------------------------------------ data plane

    def _shadow(self, op: Op, outcome: Outcome, m: Model) -> list[Violation]:
        c = m.ctx
        if c is None:
            return []
        found = self.shadow.step(moved=c.moved, writes=c.writes, copies=outcome.cows,
                                 swapped=op.moves_kv,
                                 expect=lambda key: m.blocks[key].idents)
        if op.computes_kv:  # the batch ran: its KV is written
            self.shadow.compute(lambda key: m.blocks[key].idents)
        claimed, not_prefix = computed_claims.claims(m, op, outcome.value)
        if not_prefix is not None:
            found.append(not_prefix)
        found += self.shadow.check_claims(op.kind, claimed)
        return found
