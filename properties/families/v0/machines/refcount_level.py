"""Refcount-level state machine: the target's own ``RefCounter`` and ``CopyOnWriteTracker``
(docs/API.md §7) driven directly, judged after every step by ``models.families.v0.refcount_model``
(the counts returned and shown by ``get``, ``is_appendable``, the recorded pairs; misuse refused and
atomic for targets claiming so).

Strategies aim at the edges: a small id space given with duplicates and one far id, counts
that hover around 0, 1 and 2 (where ``decr`` is refused and ``is_appendable`` flips), questions
through the read-only view, copy-on-write pairs of any ids (a tracker does not check them)
interleaved with clears, and an occasional fresh counter (instances must not share state).
Targets whose GPU allocator has no counter or tracker the suite can build skip it.
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

FAR_ID = 2**40
#: The ids a counter is built with: a small space, duplicates (they merge), one far id.
IDS = st.lists(st.one_of(st.integers(0, 5), st.just(FAR_ID)), min_size=1, max_size=6)
#: Picks one of the counter's ids (modulo their number).
PICK = st.integers(0, 255)
#: Ids of a copy-on-write pair: the tracker records any ints.
COW_IDS = st.one_of(st.integers(0, 7), st.just(FAR_ID))
MISUSE = ("incr_view", "decr_view", "unknown", "bool_id", "decr_zero", "appendable_unknown",
          "record_none")


def refcount_missing(target: Target) -> str | None:
    """Why ``target`` cannot run the refcount machine, or None."""
    hit = _missing.get(id(target))
    if hit is not None and hit[0] is target:
        return hit[1]
    adapter = target.adapter(Config(1, 1, 0, target.caps))
    why = None if adapter.has_refcount else (
        "the target's GPU allocator has no RefCounter/CopyOnWriteTracker the suite can build "
        "(no `_refcounter` with `as_readonly` and `_cow_tracker`, or a class not importable "
        "by name)")
    _missing.clear()
    _missing[id(target)] = (target, why)
    return why


_missing: dict[int, tuple[Target, str | None]] = {}


class RefcountLevelMachine(V0Machine):
    """Counts up and down, questions (direct and through the read-only view), copy-on-write
    records and clears on a standalone counter and tracker."""

    @initialize(ids=IDS)
    def start(self, ids: list[int]) -> None:
        # The pool is irrelevant: only the counter and tracker are driven.
        self.setup(Config(1, 1, 0, self.caps))
        self.do(ops.RefNew(tuple(ids)))

    # ------------------------------------------------------------------ helpers

    def _ids(self) -> list[int]:
        return self.oracle.refcount.ids()

    def _pick(self, pick: int) -> int:
        ids = self._ids()
        return ids[pick % len(ids)]

    def _counted(self) -> list[int]:
        counts = self.oracle.refcount.counts or {}
        return sorted(i for i, n in counts.items() if n > 0)

    def _typed(self) -> bool:
        return bool(self.caps.typed_errors)

    # ------------------------------------------------------------------ rules

    @precondition(lambda m: bool(m._ids()))
    @rule(pick=PICK, times=st.integers(1, 3))
    def incr(self, pick: int, times: int) -> None:
        block_id = self._pick(pick)
        for _ in range(times):
            self.do(ops.RefIncr(block_id))
        # is_appendable flips where the count crosses 1: ask right after every move.
        self.do(ops.CowAppendable(block_id))

    @precondition(lambda m: bool(m._counted()))
    @rule(pick=PICK)
    def decr(self, pick: int) -> None:
        counted = self._counted()
        block_id = counted[pick % len(counted)]
        self.do(ops.RefDecr(block_id))
        self.do(ops.CowAppendable(block_id))  # the answer after the count moved down

    @precondition(lambda m: bool(m._ids()))
    @rule(pick=PICK, readonly=st.booleans())
    def get(self, pick: int, readonly: bool) -> None:
        self.do(ops.RefGet(self._pick(pick), readonly))

    @rule(pick=PICK, no_id=st.booleans())
    def appendable(self, pick: int, no_id: bool) -> None:
        self.do(ops.CowAppendable(None if no_id or not self._ids() else self._pick(pick)))

    @rule(src=COW_IDS, dst=COW_IDS)
    def record(self, src: int, dst: int) -> None:
        self.do(ops.CowRecord(src, dst))

    @rule()
    def clear(self) -> None:
        self.do(ops.CowClear())

    @rule(ids=IDS)
    def renew(self, ids: list[int]) -> None:
        """A fresh counter and tracker: every count back to 0, no pairs (nothing shared with
        the previous instances)."""
        self.do(ops.RefNew(tuple(ids)))

    # ------------------------------------------------------------------ misuse

    @precondition(lambda m: m._typed())
    @rule(which=st.sampled_from(MISUSE), pick=PICK, block_id=COW_IDS)
    def misuse(self, which: str, pick: int, block_id: int) -> None:
        """Refused with a typed error, without a trace (counts and pairs unchanged)."""
        ids = self._ids()
        known = self._pick(pick) if ids else 0
        unknown = next(i for i in range(block_id, block_id + 8) if i not in ids)
        op: ops.Op
        if which in ("incr_view", "decr_view"):
            op = ops.RefIncr(known, readonly=True) if which == "incr_view" \
                else ops.RefDecr(known, readonly=True)
        elif which == "unknown":
            op = (ops.RefIncr, ops.RefDecr, ops.RefGet)[pick % 3](unknown, bool(pick & 4))
        elif which == "bool_id":  # True/False alias the int keys 1 and 0
            op = (ops.RefIncr, ops.RefGet)[pick % 2](bool(pick & 2))
        elif which == "decr_zero":
            zero = [i for i in ids if i not in self._counted()]
            op = ops.RefDecr(zero[pick % len(zero)] if zero else unknown)
        elif which == "appendable_unknown":
            op = ops.CowAppendable(unknown)
        else:
            op = ops.CowRecord(None, block_id) if pick % 2 else ops.CowRecord(block_id, None)
        self.do(op)


#: The machine runs ``1 / REFCOUNT_SHARE`` of the profile's examples: a counter and a tracker
#: have far fewer states than an allocator.
REFCOUNT_SHARE = 8


class RefcountLevelTest:
    """Mixin for the machine's ``TestCase``: skipped, with the reason, for a target without a
    counter and tracker the suite can build; ``1 / REFCOUNT_SHARE`` of the profile's
    examples."""

    settings: hypothesis.settings  # the profile's, from the machine's TestCase

    def setUp(self) -> None:
        why = refcount_missing(current_target())
        if why is not None:
            raise unittest.SkipTest(why)
        self.settings = hypothesis.settings(
            self.settings, max_examples=max(1, self.settings.max_examples // REFCOUNT_SHARE))


class TestRefcountLevel(RefcountLevelTest, RefcountLevelMachine.TestCase):  # type: ignore[misc,valid-type]
    """The refcount machine against the selected target."""
