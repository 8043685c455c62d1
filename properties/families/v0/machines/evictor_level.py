"""Evictor-level state machine: the target's own evictor (docs/API.md §6) driven directly,
judged after every step by ``models.families.v0.evictor_model`` (victim, returned hash,
``num_blocks``, ``free_table``, ``__contains__``; misuse refused and atomic for targets claiming
so).

Strategies aim at the hard states: a small id space (ids come back after evict and remove),
few distinct times (ties) drawn in any order (times that go back, updates to older times), equal
and different ``num_hashed_tokens``, a monotonic clock next to them (the in-order fast path of
a run-based evictor), and one long churn of updates and re-adds per example (enough stored keys
to trigger lazy-deletion compaction). Targets whose GPU allocator has no evictor skip it.
"""

from __future__ import annotations

import unittest

import hypothesis
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from properties.core.selection import current_target
from properties.core.targets import Target
from properties.families.v0.machines.base import V0Machine

#: Block ids: a small space so ids are re-added after evict/remove; one far id.
IDS = st.one_of(st.integers(0, 7), st.just(2**40))
#: Few distinct times, drawn in any order (ties, times that go back); ``None``: the next tick
#: of a monotonic clock (steps of 0 and 1), the in-order pattern of a serving engine.
TIMES = st.sampled_from((0.0, 1.0, 2.0, 3.0, 7.5, None, None))
TOKENS = st.sampled_from((0, 1, 2, 4))
HASHES = st.integers(0, 2**63 - 1)
#: Picks one of the current candidates (modulo their number).
PICK = st.integers(0, 255)
#: Steps of the churn rule: past the compaction slack of a lazily deleting evictor.
CHURN = 80


def evictor_missing(target: Target) -> str | None:
    """Why ``target`` cannot run the evictor machine, or None."""
    hit = _missing.get(id(target))
    if hit is not None and hit[0] is target:
        return hit[1]
    why = None
    if not target.caps.prefix_caching:
        why = "the target's allocator type has no evictor (not prefix-caching)"
    else:
        adapter = target.adapter(Config(1, 1, 0, target.caps))
        if not adapter.has_evictor:
            why = ("the target's GPU allocator has no evictor the suite can build (no "
                   "`evictor` attribute, or its class is not importable by name)")
    _missing.clear()
    _missing[id(target)] = (target, why)
    return why


_missing: dict[int, tuple[Target, str | None]] = {}


class EvictorLevelMachine(V0Machine):
    """Add, update, remove, evict and membership questions on a standalone evictor."""

    churned: bool

    @initialize(churn_first=st.booleans(), times=st.lists(TIMES, min_size=4, max_size=4),
                backwards=st.booleans())
    def start(self, churn_first: bool, times: list[float | None], backwards: bool) -> None:
        # The pool is irrelevant: only the evictor is driven (its class comes from the pool).
        self.setup(Config(1, 1, 0, self.caps))
        self.churned = False
        if churn_first:  # most programs are short: churn at the start of half of them
            self.churn(times, backwards)
            self.churned = False

    # ------------------------------------------------------------------ helpers

    def _time(self, time: float | None, pick: int = 0) -> float:
        return self.tick(float(pick % 2)) if time is None else time

    def _present(self, pick: int) -> int:
        held = sorted(self.oracle.evictor.meta)
        return held[pick % len(held)]

    def _absent(self, block_id: int) -> int:
        held = self.oracle.evictor.meta
        while block_id in held:
            block_id = (block_id + 1) % 16
        return block_id

    def _typed(self) -> bool:
        return bool(self.caps.typed_errors)

    # ------------------------------------------------------------------ rules

    @rule(block_id=IDS, content_hash=HASHES, tokens=TOKENS, time=TIMES, pick=PICK)
    def add(self, block_id: int, content_hash: int, tokens: int, time: float | None,
            pick: int) -> None:
        if len(self.oracle.evictor.meta) >= 9:
            return self.evict()
        self.do(ops.EvictorAdd(self._absent(block_id), content_hash, tokens,
                               self._time(time, pick)))
        return None

    @precondition(lambda m: bool(m.oracle.evictor.meta))
    @rule(pick=PICK, time=TIMES)
    def update(self, pick: int, time: float | None) -> None:
        self.do(ops.EvictorUpdate(self._present(pick), self._time(time, pick // 7)))

    @precondition(lambda m: bool(m.oracle.evictor.meta))
    @rule(pick=PICK)
    def remove(self, pick: int) -> None:
        self.do(ops.EvictorRemove(self._present(pick)))

    @precondition(lambda m: bool(m.oracle.evictor.meta))
    @rule()
    def evict(self) -> None:
        self.do(ops.EvictorEvict())

    @rule(ids=st.lists(IDS, min_size=1, max_size=3, unique=True))
    def contains(self, ids: list[int]) -> None:
        self.do(ops.EvictorContains(tuple(ids)))

    @precondition(lambda m: not m.churned and bool(m.oracle.evictor.meta))
    @rule(times=st.lists(TIMES, min_size=4, max_size=4), backwards=st.booleans())
    def churn(self, times: list[float | None], backwards: bool) -> None:
        """Many updates over the candidates (a remove and re-add every few) at times that
        mostly repeat: stored keys pile up past any compaction threshold; then evict them all.
        ``backwards``: first one candidate jumps ahead of the clock, then every time is older
        (a run-based evictor files them all out of order and compacts its runs away).
        It tops the candidates up to three. (It draws more than the short rules and needs a
        candidate first, so a shrunk counterexample prefers the short rules.)"""
        self.churned = True
        meta = self.oracle.evictor.meta
        for block_id in range(3 - len(meta)):
            self.do(ops.EvictorAdd(self._absent(block_id), 1000 + block_id, block_id % 2,
                                   self._time(times[block_id], block_id)))
        ids = sorted(meta)
        if backwards:
            self.do(ops.EvictorUpdate(ids[0], self.tick(10.0)))
            times = [0.5 if t is None else t for t in times]
        for step in range(CHURN):
            block_id = ids[step % len(ids)]
            if step % 7 == 6:
                self.do(ops.EvictorRemove(block_id))
                self.do(ops.EvictorAdd(block_id, 2000 + step, step % 3, float(step % 4)))
            else:
                self.do(ops.EvictorUpdate(block_id, self._time(times[step % 4], step)))
        # a tie between an added and an updated key, and between -0.0 and 0.0 (equal
        # times): the deepest candidate, re-added at 0.0, goes before the others updated to
        # -0.0 (and their add order decides among them).
        self.do(ops.EvictorRemove(ids[-1]))
        self.do(ops.EvictorAdd(ids[-1], 3000, 5, 0.0))  # 5: deeper than any of TOKENS
        for block_id in ids[:-1]:
            self.do(ops.EvictorUpdate(block_id, -0.0))
        for _ in range(len(meta)):  # bounded: an absorbed expected failure makes do a no-op
            self.do(ops.EvictorEvict())
        # negative times order like the numbers, the smallest subnormal below 0.0 too
        # (same depth: the victims go -2.5, -1.0, -5e-324, 0.0, whatever the add order).
        for block_id, time in enumerate((0.0, -5e-324, -1.0, -2.5)):
            self.do(ops.EvictorAdd(self._absent(block_id), 4000 + block_id, 1, time))
        for _ in range(4):
            self.do(ops.EvictorEvict())
        # an update leaves no trace of the old time: a candidate added at -1.0 (whose
        # order-preserving bit pattern is odd) and updated to 0.0 ties with one added at 0.0,
        # and goes first as the deeper one.
        first, second = self._absent(0), self._absent(self._absent(0) + 1)
        self.do(ops.EvictorAdd(first, 5000, 2, -1.0))
        self.do(ops.EvictorAdd(second, 5001, 1, 0.0))
        self.do(ops.EvictorUpdate(first, 0.0))
        for _ in range(2):
            self.do(ops.EvictorEvict())

    # ------------------------------------------------------------------ misuse

    @precondition(lambda m: m._typed())
    @rule(which=st.sampled_from(("update", "remove", "evict", "add")), block_id=IDS,
          pick=PICK, content_hash=HASHES, tokens=TOKENS, time=TIMES)
    def misuse(self, which: str, block_id: int, pick: int, content_hash: int, tokens: int,
               time: float | None) -> None:
        """Refused with a typed error, without a trace; ``add`` of a candidate may also
        overwrite it (docs/API.md is silent, see ``models.families.v0.evictor_model``)."""
        held = self.oracle.evictor.meta
        if which == "evict":
            if held:
                return self.evict()
            self.do(ops.EvictorEvict())
        elif which == "add":  # of a candidate, or malformed (a bool or negative id, a
            # negative token count; a bool id aliases no candidate's int id)
            alias = next((b for b in (True, False) if int(b) not in held), -1)
            block_id, tokens = (self._present(pick), tokens) if held and pick % 3 \
                else ((-1, tokens), (block_id, -1), (alias, tokens))[pick // 3 % 3]
            self.do(ops.EvictorAdd(block_id, content_hash, tokens, self._time(time, pick)))
        else:
            absent = block_id if block_id not in held else self._absent(block_id)
            op: ops.Op = ops.EvictorUpdate(absent, self._time(time, pick)) \
                if which == "update" else ops.EvictorRemove(absent)
            self.do(op)
        return None


#: The machine runs ``1 / EVICTOR_SHARE`` of the profile's examples: an evictor has far fewer
#: states than an allocator (and each example's churn is long).
EVICTOR_SHARE = 4


class EvictorLevelTest:
    """Mixin for the machine's ``TestCase``: skipped, with the reason, for a target without an
    evictor the suite can build; ``1 / EVICTOR_SHARE`` of the profile's examples."""

    settings: hypothesis.settings  # the profile's, from the machine's TestCase

    def setUp(self) -> None:
        why = evictor_missing(current_target())
        if why is not None:
            raise unittest.SkipTest(why)
        self.settings = hypothesis.settings(
            self.settings, max_examples=max(1, self.settings.max_examples // EVICTOR_SHARE))


class TestEvictorLevel(EvictorLevelTest, EvictorLevelMachine.TestCase):  # type: ignore[misc,valid-type]
    """The evictor machine against the selected target."""
