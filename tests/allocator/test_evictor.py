"""LRUEvictor: exact victim order, error paths, bounded heap, brute-force comparison."""

from __future__ import annotations

import enum
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from prefixcache import (
    BlockMetaData,
    EvictionPolicy,
    InvalidArgumentError,
    LRUEvictor,
    NoFreeBlocksError,
    UnknownBlockIdError,
    make_evictor,
)


def drain(evictor: LRUEvictor) -> list[int]:
    order = []
    while evictor.num_blocks:
        order.append(evictor.evict()[0])
    return order


def test_add_records_metadata_in_insertion_order() -> None:
    evictor = LRUEvictor()
    evictor.add(5, 50, 16, 2.0)
    evictor.add(1, 10, 32, 1.0)
    assert list(evictor.free_table) == [5, 1]
    assert evictor.free_table[1] == BlockMetaData(10, 32, 1.0)
    assert evictor.free_table[1] != BlockMetaData(10, 32, 2.0)
    assert BlockMetaData(1, 2, 3) != (1, 2, 3)
    assert "num_hashed_tokens=32" in repr(evictor.free_table[1])
    assert 5 in evictor and 2 not in evictor
    assert evictor.num_blocks == 2


def test_victim_is_oldest_then_most_tokens_then_earliest_added() -> None:
    evictor = LRUEvictor()
    evictor.add(0, 100, 16, 5)  # newest
    evictor.add(1, 101, 16, 1)
    evictor.add(2, 102, 48, 1)  # oldest, most tokens
    evictor.add(3, 103, 32, 1)
    evictor.add(4, 104, 32, 1)  # tie with 3 on time and tokens: 3 was added first
    evictor.add(5, 105, 64, 3)
    assert evictor.peek_order() == [2, 3, 4, 1, 5, 0]
    assert evictor.evict() == (2, 102)
    assert drain(evictor) == [3, 4, 1, 5, 0]


def test_out_of_order_times_and_updates_are_respected() -> None:
    evictor = LRUEvictor()
    for block_id, time in [(0, 9.0), (1, 3.0), (2, 7.0), (3, 1.0)]:
        evictor.add(block_id, block_id, 16, time)
    evictor.update(3, 10.0)  # was the oldest, now the newest
    evictor.update(2, 0.5)
    assert evictor.free_table[3].last_accessed == 10.0
    assert drain(evictor) == [2, 1, 0, 3]


def test_update_keeps_the_add_position_for_ties() -> None:
    evictor = LRUEvictor()
    evictor.add(7, 0, 16, 4)
    evictor.add(8, 0, 16, 2)
    evictor.update(7, 2)  # now ties with 8 on time and tokens; 7 was added first
    assert drain(evictor) == [7, 8]


def test_remove_and_readd_moves_the_add_position() -> None:
    evictor = LRUEvictor()
    evictor.add(1, 0, 16, 0)
    evictor.add(2, 0, 16, 0)
    evictor.remove(1)
    evictor.add(1, 0, 16, 0)
    assert drain(evictor) == [2, 1]


def test_error_paths_leave_the_evictor_unchanged() -> None:
    evictor = LRUEvictor()
    with pytest.raises(ValueError):
        evictor.evict()
    with pytest.raises(NoFreeBlocksError):
        evictor.evict()
    evictor.add(1, 11, 16, 1.0)
    before = (list(evictor.free_table.items()), evictor.peek_order())
    with pytest.raises(KeyError):
        evictor.update(2, 3.0)
    with pytest.raises(ValueError):
        evictor.remove(2)
    with pytest.raises(UnknownBlockIdError):
        evictor.remove(2)
    with pytest.raises(InvalidArgumentError):
        evictor.add(1, 12, 16, 2.0)
    for bad_time in (math.nan, "soon", True):
        with pytest.raises(InvalidArgumentError):
            evictor.add(3, 13, 16, bad_time)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            evictor.update(1, bad_time)  # type: ignore[arg-type]
    assert (list(evictor.free_table.items()), evictor.peek_order()) == before


def test_heap_stays_bounded_under_many_updates_and_removals() -> None:
    evictor = LRUEvictor()
    for block_id in range(100):
        evictor.add(block_id, block_id, 16, block_id)
    for step in range(10_000):
        # in-order updates (runs) mixed with out-of-order ones (heap)
        evictor.update(step % 100, 1000 + step if step % 3 else step / 100)
        assert evictor._stored <= 2 * evictor.num_blocks + LRUEvictor._COMPACT_SLACK + 1
        check_structure(evictor)
    for block_id in range(0, 100, 2):
        evictor.remove(block_id)
    assert evictor._stored <= 2 * evictor.num_blocks + LRUEvictor._COMPACT_SLACK + 1
    check_structure(evictor)
    last_time = {b: (1000 + s if s % 3 else s / 100) for s in range(10_000) for b in [s % 100]}
    expected = sorted(range(1, 100, 2), key=lambda b: last_time[b])
    assert drain(evictor) == expected
    assert evictor._heap == [] and not evictor._runs and evictor._stored == 0


def check_structure(evictor: LRUEvictor) -> None:
    """The evictor's storage invariants: non-empty runs with strictly increasing time
    fields, ``_tail_time`` the last run's, ``_stored`` exact, every live key stored."""
    times = []
    for run in evictor._runs:
        assert run, "an empty run"
        assert len({key >> 192 for key in run}) == 1, "a run mixes time stamps"
        assert run[0] == min(run), "a run is not a heap"
        times.append(run[0] >> 192)
    assert times == sorted(set(times))
    if times:
        assert evictor._tail_time == times[-1]
    assert evictor._heap[:1] == sorted(evictor._heap)[:1]
    stored = list(evictor._heap) + [key for run in evictor._runs for key in run]
    assert evictor._stored == len(stored)
    stored_ids = set(map(id, stored))
    assert all(id(meta._key) in stored_ids for meta in evictor.free_table.values())


def test_in_order_times_use_runs_and_leave_the_heap_empty() -> None:
    evictor = LRUEvictor()
    for block_id in range(50):
        # five blocks per time stamp, freed first block first (fewest tokens first)
        evictor.add(block_id, block_id, 16 * (1 + block_id % 5), block_id // 5)
    assert evictor._heap == [] and len(evictor._runs) == 10
    evictor.update(3, 100)  # a touch at a later time: a new run at the end
    evictor.update(7, 0)  # older than the newest run: the heap
    assert len(evictor._heap) == 1
    check_structure(evictor)
    expected = sorted(
        range(50),
        key=lambda b: ({3: 100, 7: 0}.get(b, b // 5), -(16 * (1 + b % 5)), b),
    )
    assert drain(evictor) == expected


def test_runs_restart_after_a_drain_below_old_heap_times() -> None:
    evictor = LRUEvictor()
    evictor.add(0, 0, 16, 10)
    evictor.add(1, 1, 16, 20)
    evictor.add(2, 2, 16, 15)  # heap
    assert evictor.evict()[0] == 0
    assert evictor.evict()[0] == 2
    evictor.add(3, 3, 16, 5)  # runs: [20, ...] -> heap
    evictor.add(4, 4, 16, 30)
    assert drain(evictor) == [3, 1, 4]
    evictor.add(5, 5, 16, 1)  # empty again: a new run at any time
    evictor.add(6, 6, 16, 0)
    evictor.add(7, 7, 32, 1)
    check_structure(evictor)
    assert drain(evictor) == [6, 7, 5]


def test_compaction_can_drop_every_run() -> None:
    evictor = LRUEvictor()
    evictor.add(0, 0, 16, 100)  # the only run
    times = {block_id: float(block_id) for block_id in range(1, 40)}
    for block_id, time in times.items():
        evictor.add(block_id, block_id, 16, time)  # older than the run: the heap
    evictor.remove(0)  # the run now holds one stale key
    for step in range(200):
        block_id = 1 + step % 39
        times[block_id] = float(step % 50)
        evictor.update(block_id, times[block_id])  # still older than the run: the heap
        if not evictor._runs:
            break  # a compaction dropped the emptied run
    assert not evictor._runs and evictor._heap
    check_structure(evictor)
    assert drain(evictor) == sorted(times, key=lambda b: (times[b], b))


def test_compaction_keeps_runs_in_order() -> None:
    evictor = LRUEvictor()
    for block_id in range(200):
        evictor.add(block_id, block_id, 16, block_id // 4)
    for block_id in range(0, 200, 3):
        evictor.remove(block_id)
    for block_id in range(1, 200, 3):
        evictor.update(block_id, 1000 - block_id)  # all but the first out of order
    check_structure(evictor)
    assert evictor._stored <= 2 * evictor.num_blocks + LRUEvictor._COMPACT_SLACK + 1
    times = {b: (1000 - b if b % 3 == 1 else b // 4) for b in range(200) if b % 3}
    assert drain(evictor) == sorted(times, key=lambda b: (times[b], b))


def test_make_evictor() -> None:
    assert isinstance(make_evictor(EvictionPolicy.LRU), LRUEvictor)

    class Other(enum.Enum):
        FIFO = 1

    with pytest.raises(ValueError):
        make_evictor(Other.FIFO)  # type: ignore[arg-type]


class EvictorVersusBruteForce(RuleBasedStateMachine):
    """The heap evictor against a list-scanning reference with the same rule."""

    def __init__(self) -> None:
        super().__init__()
        self.evictor = LRUEvictor()
        self.model: dict[int, tuple[float, int, int, int]] = {}  # id -> (time, tokens, order, hash)
        self.order = 0

    ids = st.integers(0, 12)
    times = st.integers(0, 6).map(float)

    @rule(block_id=ids, time=times, tokens=st.sampled_from([16, 32, 48]))
    def add(self, block_id: int, time: float, tokens: int) -> None:
        if block_id in self.model:
            with pytest.raises(InvalidArgumentError):
                self.evictor.add(block_id, block_id * 7, tokens, time)
            return
        self.evictor.add(block_id, block_id * 7, tokens, time)
        self.model[block_id] = (time, tokens, self.order, block_id * 7)
        self.order += 1

    @rule(block_id=ids, time=times)
    def update(self, block_id: int, time: float) -> None:
        if block_id not in self.model:
            with pytest.raises(KeyError):
                self.evictor.update(block_id, time)
            return
        self.evictor.update(block_id, time)
        _, tokens, order, content_hash = self.model[block_id]
        self.model[block_id] = (time, tokens, order, content_hash)

    @rule(block_id=ids)
    def remove(self, block_id: int) -> None:
        if block_id not in self.model:
            with pytest.raises(ValueError):
                self.evictor.remove(block_id)
            return
        self.evictor.remove(block_id)
        del self.model[block_id]

    @precondition(lambda self: bool(self.model))
    @rule()
    def evict(self) -> None:
        expected = None
        for block_id, (time, tokens, order, _) in self.model.items():
            key = (time, -tokens, order)
            if expected is None or key < expected[0]:
                expected = (key, block_id)
        assert expected is not None
        victim = expected[1]
        assert self.evictor.evict() == (victim, self.model[victim][3])
        del self.model[victim]

    @invariant()
    def storage_is_consistent(self) -> None:
        check_structure(self.evictor)

    @invariant()
    def same_candidates(self) -> None:
        assert set(self.evictor.free_table) == set(self.model)
        assert self.evictor.num_blocks == len(self.model)
        for block_id, (time, tokens, _, content_hash) in self.model.items():
            meta = self.evictor.free_table[block_id]
            assert (meta.last_accessed, meta.num_hashed_tokens, meta.content_hash) == (
                time,
                tokens,
                content_hash,
            )


EvictorVersusBruteForce.TestCase.settings = settings(
    max_examples=200, stateful_step_count=60, derandomize=True, deadline=None
)
TestEvictorVersusBruteForce = EvictorVersusBruteForce.TestCase


class MostlyInOrderVersusBruteForce(EvictorVersusBruteForce):
    """The serving pattern: a clock that never goes back drives most adds and updates
    (the runs), mixed with the parent's arbitrary times (the heap)."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = 0.0

    @rule(ticks=st.integers(0, 2))
    def tick(self, ticks: int) -> None:
        self.clock += ticks

    @rule(block_id=EvictorVersusBruteForce.ids, tokens=st.sampled_from([16, 32, 48]))
    def add_now(self, block_id: int, tokens: int) -> None:
        self.add(block_id, self.clock, tokens)

    @rule(block_id=EvictorVersusBruteForce.ids)
    def update_now(self, block_id: int) -> None:
        self.update(block_id, self.clock)


MostlyInOrderVersusBruteForce.TestCase.settings = settings(
    max_examples=200, stateful_step_count=80, derandomize=True, deadline=None
)
TestMostlyInOrderVersusBruteForce = MostlyInOrderVersusBruteForce.TestCase


def test_time_keys_order_exactly_like_the_numbers() -> None:
    times = [-math.inf, -1e300, -2.5, -1, -0.0, 0, 1e-300, 0.5, 1, 2**53, 1e300, math.inf]
    evictor = LRUEvictor()
    for block_id, time in reversed(list(enumerate(times))):
        evictor.add(block_id, block_id, 16, time)
    # -0.0 and 0 tie on time and tokens, so the earlier add (id 5, added first) goes first
    assert drain(evictor) == [0, 1, 2, 3, 5, 4, 6, 7, 8, 9, 10, 11]


@pytest.mark.parametrize(
    ("block_id", "tokens", "time"),
    [
        (-1, 16, 0.0),
        (2**64, 16, 0.0),
        (True, 16, 0.0),
        (1, -1, 0.0),
        (1, 2**63, 0.0),
        (1, 16, 2**53 + 1),
    ],
)
def test_out_of_range_keys_are_rejected(block_id: int, tokens: int, time: float) -> None:
    evictor = LRUEvictor()
    with pytest.raises(InvalidArgumentError):
        evictor.add(block_id, 0, tokens, time)
    assert evictor.num_blocks == 0 and evictor._heap == []


_TIMES = st.floats(allow_nan=False) | st.integers(-(2**53), 2**53)


@settings(max_examples=500, deadline=None)
@given(_TIMES, _TIMES)
def test_time_field_orders_exactly_like_the_times(a: float, b: float) -> None:
    """The packed key's time field: a 64-bit non-negative int, equal for equal times (an int
    and its float, 0.0 and -0.0) and ordered as the times are, signs and infinities included."""
    from prefixcache.evictor import _time_field

    fa, fb = _time_field(a), _time_field(b)
    assert 0 <= fa < 2**64
    assert (fa < fb) == (a < b) and (fa == fb) == (a == b)
