"""RefCounter, ReadOnlyRefCounter, CopyOnWriteTracker, BlockPool, BlockList,
CacheMetricData and get_all_blocks_recursively."""

from __future__ import annotations

import random

import pytest

from prefixcache import (
    BlockList,
    BlockPool,
    CacheMetricData,
    CopyOnWriteTracker,
    DoubleFreeError,
    InvalidArgumentError,
    InvalidBlockError,
    NaiveBlock,
    NaiveBlockAllocator,
    RefCounter,
    UnknownBlockIdError,
    get_all_blocks_recursively,
)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("num_incrs", [1, 100])
def test_refcounter_counts_up_then_down_then_refuses(seed: int, num_incrs: int) -> None:
    rng = random.Random(seed)
    counter = RefCounter(all_block_indices=list(range(1024)))
    block_id = rng.randrange(1024)
    assert [counter.incr(block_id) for _ in range(num_incrs)] == list(range(1, num_incrs + 1))
    assert [counter.decr(block_id) for _ in range(num_incrs)] == list(range(num_incrs - 1, -1, -1))
    with pytest.raises(AssertionError):
        counter.decr(block_id)
    with pytest.raises(DoubleFreeError):
        counter.decr(block_id)
    assert counter.get(block_id) == 0


def test_refcounter_merges_duplicates_and_rejects_unknown_ids() -> None:
    counter = RefCounter([3, 3, 5])
    assert counter._refcounts == {3: 0, 5: 0}
    for op in (counter.incr, counter.decr, counter.get):
        with pytest.raises(UnknownBlockIdError):
            op(4)
        with pytest.raises(KeyError):
            op(4)
    assert counter._refcounts == {3: 0, 5: 0}


def test_readonly_refcounter_reads_through_and_refuses_writes() -> None:
    counter = RefCounter([0, 1])
    view = counter.as_readonly()
    counter.incr(1)
    assert view.get(1) == 1
    with pytest.raises(ValueError):
        view.incr(1)
    with pytest.raises(ValueError):
        view.decr(1)
    assert counter.get(1) == 1


def test_copy_on_write_tracker() -> None:
    counter = RefCounter([0, 1])
    tracker = CopyOnWriteTracker(counter.as_readonly())
    alloc = NaiveBlockAllocator(NaiveBlock, num_blocks=2, block_size=4)
    block = NaiveBlock(None, [], 4, alloc)
    assert tracker.is_appendable(block)  # no id
    block.block_id = 0
    assert tracker.is_appendable(block)  # refcount 0
    counter.incr(0)
    assert tracker.is_appendable(block)
    counter.incr(0)
    assert not tracker.is_appendable(block)
    tracker.record_cow(0, 1)
    tracker.record_cow(1, 0)
    assert tracker.pending() == [(0, 1), (1, 0)]
    with pytest.raises(InvalidArgumentError):
        tracker.record_cow(None, 1)
    with pytest.raises(InvalidArgumentError):
        tracker.record_cow(1, None)
    assert tracker.clear_cows() == [(0, 1), (1, 0)]
    assert tracker.clear_cows() == []


def test_block_pool_creates_lazily_reuses_fifo_and_doubles() -> None:
    alloc = NaiveBlockAllocator(NaiveBlock, num_blocks=1, block_size=4)
    pool = BlockPool(4, NaiveBlock, alloc, pool_size=2)
    a = pool.init_block(None, [1], 4, 0)
    b = pool.init_block(a, [2, 3], 4, 1)
    assert (a.pool_id, b.pool_id) == (0, 1)  # type: ignore[attr-defined]
    assert pool.pool_size == 2
    c = pool.init_block(None, [], 4, None)
    assert pool.pool_size == 4 and c.pool_id == 2  # type: ignore[attr-defined]
    pool.free_block(b)
    pool.free_block(a)
    pool.free_block(a)  # already free: ignored
    pool.free_block(NaiveBlock(None, [], 4, alloc))  # not from this pool: ignored
    d = pool.init_block(None, [], 4, None)  # below capacity: a new object, not a reuse
    assert d.pool_id == 3 and pool.pool_size == 4  # type: ignore[attr-defined]
    first = pool.init_block(None, [9], 4, 7)
    second = pool.init_block(None, [8], 4, 6)
    assert first is b and second is a  # at capacity: reuse, first in first out
    assert pool.pool_size == 4
    pool.init_block(None, [], 4, None)  # nothing free: capacity doubles
    assert pool.pool_size == 8
    assert first.token_ids == [9] and first.block_id == 7 and first.prev_block is None
    with pytest.raises(InvalidArgumentError):
        BlockPool(4, NaiveBlock, alloc, pool_size=-1)


def test_block_pool_of_size_zero_still_grows() -> None:
    alloc = NaiveBlockAllocator(NaiveBlock, num_blocks=0, block_size=4)
    pool = BlockPool(4, NaiveBlock, alloc, pool_size=0)
    block = pool.init_block(None, [], 4, None)
    assert pool.pool_size == 1 and block.token_ids == []


def test_block_list_keeps_ids_in_sync() -> None:
    alloc = NaiveBlockAllocator(NaiveBlock, num_blocks=8, block_size=2)
    blocks = alloc.allocate_immutable_blocks(None, [[1, 2], [3]])
    block_list = BlockList(blocks)
    assert block_list.list() is blocks
    assert block_list.ids() == [0, 1]
    assert len(block_list) == 2 and block_list[1] is blocks[1]
    forked = alloc.fork(blocks[-1])
    block_list.append_token_ids(1, [4])  # shared: copy on write
    assert block_list.ids() == [0, 2]
    assert block_list[1].block_id == 2 and forked[1].block_id == 1
    extra = alloc.allocate_mutable_block(None)
    block_list.append(extra)
    assert block_list.ids() == [0, 2, 3]
    block_list[0] = forked[0]
    assert block_list.ids() == [0, 2, 3] and block_list[0] is forked[0]
    orphan = NaiveBlock(None, [], 2, alloc)
    for op in (lambda: block_list.append(orphan), lambda: block_list.update([orphan])):
        with pytest.raises(InvalidBlockError):
            op()
    with pytest.raises(InvalidBlockError):
        block_list[0] = orphan
    assert block_list.ids() == [0, 2, 3]
    block_list.reset()
    assert len(block_list) == 0 and block_list.ids() == [] and block_list.list() == []


def test_cache_metric_data_is_exact_across_windows() -> None:
    metric = CacheMetricData()
    assert metric.get_hit_rate() == 0.0
    metric.query(hit=False)
    assert metric.get_hit_rate() == 0.0
    metric.query(hit=True)
    assert metric.get_hit_rate() == 0.5
    for i in range(2998):
        metric.query(hit=i % 3 == 0)
    assert metric.num_completed_blocks == 3
    assert metric.num_incompleted_block_queries == 0
    assert metric.get_hit_rate() == metric.num_hits / 3000
    assert metric.num_hits == 1 + len(range(0, 2998, 3))
    small = CacheMetricData(block_size=2)
    small.query(True)
    small.query(False)
    assert small.num_completed_blocks == 1 and small.completed_block_cache_hit_rate == 0.5


def test_get_all_blocks_recursively_is_iterative_and_detects_cycles() -> None:
    alloc = NaiveBlockAllocator(NaiveBlock, num_blocks=1, block_size=1)
    prev = None
    chain = []
    for i in range(5000):
        prev = NaiveBlock(prev, [i], 1, alloc)
        chain.append(prev)
    assert get_all_blocks_recursively(chain[-1]) == chain
    chain[0]._prev_block = chain[-1]
    with pytest.raises(InvalidArgumentError):
        get_all_blocks_recursively(chain[-1])
