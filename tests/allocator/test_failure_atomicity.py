"""Every misuse raises its typed error and leaves the full observable state unchanged
(free counts, cache, evictor order, refcounts, trackers, CoW records, hit rate, blocks).
"""

from __future__ import annotations

from collections.abc import Callable
from unittest.mock import MagicMock

import pytest

from prefixcache import (
    BlockFullError,
    CpuGpuBlockAllocator,
    Device,
    DoubleFreeError,
    ForkError,
    ImmutableBlockError,
    InvalidArgumentError,
    InvalidBlockError,
    NaiveBlock,
    NaiveBlockAllocator,
    NoFreeBlocksError,
    PrefixCachingBlock,
    PrefixCachingBlockAllocator,
    SwapError,
    UnknownBlockIdError,
    UnknownDeviceError,
)
from prefixcache.interfaces import Block

from ._state import snapshot


def busy_prefix_allocator() -> tuple[PrefixCachingBlockAllocator, dict[str, Block]]:
    """A 6-block allocator in a mixed state: active cached, evictable, mutable, shared,
    freed handle, touched ids, recorded CoW, access times and a hit-rate history."""
    alloc = PrefixCachingBlockAllocator(num_blocks=6, block_size=2)
    a = alloc.allocate_immutable_block(None, [1, 2])
    b = alloc.allocate_immutable_block(a, [3, 4])
    alloc.allocate_immutable_block(None, [1, 2])  # a hit
    mutable = alloc.allocate_mutable_block(b)
    mutable.append_token_ids([5])
    shared = alloc.fork(mutable)[-1]
    evictable = alloc.allocate_immutable_block(None, [7, 8])
    alloc.mark_blocks_as_accessed([evictable.block_id], 4.0)  # type: ignore[list-item]
    alloc.free(evictable, keep_block_object=True)
    cow_src = alloc.allocate_mutable_block(None)
    cow_src.append_token_ids([9])
    alloc.fork(cow_src)
    cow_src.append_token_ids([10])  # copy on write -> recorded pair, promotion
    alloc.mark_blocks_as_accessed([a.block_id], 2.0)  # type: ignore[list-item]
    blocks = {
        "a": a,
        "b": b,
        "mutable": mutable,
        "shared": shared,
        "freed": evictable,
        "cow": cow_src,
    }
    return alloc, blocks


def assert_atomic(
    alloc: object, blocks: dict[str, Block], error: type[BaseException], op: Callable[[], object]
) -> None:
    before = snapshot(alloc, blocks.values())
    with pytest.raises(error):
        op()
    assert snapshot(alloc, blocks.values()) == before


def test_busy_fixture_is_really_mixed() -> None:
    alloc, blocks = busy_prefix_allocator()
    assert blocks["freed"].block_id is None and blocks["shared"].block_id is not None
    assert alloc.get_num_free_blocks() == 1  # one evictable, no hashless-free
    assert alloc.evictor.num_blocks == 1 and alloc._cow_tracker.pending()
    assert alloc.metric_data.num_hits == 1 and alloc._touched_blocks


def test_prefix_allocator_misuse() -> None:
    alloc, blocks = busy_prefix_allocator()
    other = PrefixCachingBlockAllocator(num_blocks=6, block_size=2)
    foreign_same_id = other.allocate_immutable_block(None, [1, 2])
    naive = NaiveBlockAllocator(NaiveBlock, 6, 2).allocate_mutable_block(None)
    never = PrefixCachingBlock(None, [1], 2, alloc)
    mock_block = MagicMock(spec=PrefixCachingBlock)
    a, b, mutable, freed = blocks["a"], blocks["b"], blocks["mutable"], blocks["freed"]
    cases: list[tuple[type[BaseException], Callable[[], object]]] = [
        (DoubleFreeError, lambda: alloc.free(freed)),
        (AssertionError, lambda: alloc.free(freed)),
        (InvalidBlockError, lambda: alloc.free(foreign_same_id)),
        (InvalidBlockError, lambda: alloc.free(naive)),
        (InvalidBlockError, lambda: alloc.free(never)),
        (InvalidBlockError, lambda: alloc.free(mock_block)),
        (ForkError, lambda: alloc.fork(freed)),
        (InvalidBlockError, lambda: alloc.fork(foreign_same_id)),
        (BlockFullError, lambda: mutable.append_token_ids([6, 7])),
        (ImmutableBlockError, lambda: a.append_token_ids([1])),
        (ImmutableBlockError, lambda: b.append_token_ids([])),
        (InvalidArgumentError, lambda: mutable.append_token_ids([None])),  # type: ignore[list-item]
        (InvalidArgumentError, lambda: alloc.allocate_immutable_block(None, [1])),
        (InvalidArgumentError, lambda: alloc.allocate_immutable_block(mutable, [1, 2])),
        (InvalidArgumentError, lambda: alloc.allocate_immutable_block(naive, [1, 2])),
        (InvalidArgumentError, lambda: alloc.allocate_mutable_block(None, device=Device.GPU)),
        (InvalidArgumentError, lambda: alloc.allocate_mutable_block(None, extra_hash=1.0)),  # type: ignore[arg-type]
        (NoFreeBlocksError, lambda: alloc.allocate_immutable_blocks(None, [[20, 21], [22, 23]])),
        (InvalidArgumentError, lambda: alloc.allocate_immutable_blocks(None, [[1, 2], [3]])),
        (UnknownBlockIdError, lambda: alloc.mark_blocks_as_accessed([0, 99], 9.0)),
        (KeyError, lambda: alloc.mark_blocks_as_accessed([0, 99], 9.0)),
        (InvalidArgumentError, lambda: alloc.mark_blocks_as_accessed([0], float("nan"))),
        (UnknownBlockIdError, lambda: alloc.block_is_computed(99)),
        (UnknownBlockIdError, lambda: alloc.get_computed_block_ids([], [0, 99, 1])),
        (InvalidArgumentError, lambda: alloc.get_computed_block_ids([0, 1], [0, 1])),
        (InvalidArgumentError, lambda: alloc.get_computed_block_ids([], [])),
        (UnknownBlockIdError, lambda: alloc.get_physical_block_id(99)),
        (InvalidBlockError, lambda: alloc.is_block_cached(mutable)),
        (InvalidBlockError, lambda: alloc.promote_to_immutable_block(mutable)),
        (InvalidBlockError, lambda: alloc.promote_to_immutable_block(foreign_same_id)),
        (InvalidBlockError, lambda: alloc.cow_block_if_not_appendable(foreign_same_id)),
        (InvalidArgumentError, lambda: alloc.swap_out([a, a])),
        (InvalidBlockError, lambda: alloc.swap_out([a, foreign_same_id])),
        (SwapError, lambda: alloc.swap_in([a])),
        (InvalidArgumentError, lambda: alloc.get_num_blocks_touched([a], -1)),
    ]
    for index, (error, op) in enumerate(cases):
        try:
            assert_atomic(alloc, blocks, error, op)
        except BaseException as exc:
            raise AssertionError(f"case {index} ({error.__name__})") from exc


def test_allocate_immutable_blocks_running_out_half_way_takes_nothing() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=3, block_size=2)
    before = snapshot(alloc)
    with pytest.raises(NoFreeBlocksError):
        alloc.allocate_immutable_blocks(None, [[1, 2], [3, 4], [5, 6], [7, 8]])
    assert snapshot(alloc) == before
    assert alloc.get_num_free_blocks() == 3 and alloc.metric_data.num_queries == 0


def test_cached_prefix_makes_the_same_chain_fit() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=3, block_size=2)
    kept = alloc.allocate_immutable_blocks(None, [[1, 2], [3, 4]])
    blocks = alloc.allocate_immutable_blocks(None, [[1, 2], [3, 4], [5, 6]])
    assert [b.block_id for b in blocks] == [0, 1, 2]
    assert alloc.get_num_free_blocks_needed(None, [[1, 2], [3, 4], [5, 6], [7, 8]]) == 1
    before = snapshot(alloc, kept + blocks)
    with pytest.raises(NoFreeBlocksError):
        alloc.allocate_immutable_blocks(None, [[1, 2], [3, 4], [5, 6], [7, 8]])
    assert snapshot(alloc, kept + blocks) == before


def test_failed_immutable_allocation_records_no_miss() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=1, block_size=2)
    alloc.allocate_immutable_block(None, [1, 2])
    before = snapshot(alloc)
    with pytest.raises(NoFreeBlocksError):
        alloc.allocate_immutable_block(None, [3, 4])
    assert snapshot(alloc) == before
    assert alloc.metric_data.num_queries == 1


def test_copy_on_write_without_a_free_block_leaves_the_block_unchanged() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=1, block_size=4)
    block = alloc.allocate_mutable_block(None)
    block.append_token_ids([1])
    fork = alloc.fork(block)[0]
    blocks = {"block": block, "fork": fork}
    assert_atomic(alloc, blocks, NoFreeBlocksError, lambda: block.append_token_ids([2]))
    assert alloc._refcounter.get(0) == 2 and block.token_ids == [1]


def test_copy_on_write_takes_the_target_before_dropping_the_source() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=2, block_size=4)
    block = alloc.allocate_mutable_block(None)
    block.append_token_ids([1])
    alloc.fork(block)
    block.append_token_ids([2])
    assert block.block_id == 1 and alloc._refcounter._refcounts == {0: 1, 1: 1}
    assert alloc.clear_copy_on_writes() == [(0, 1)]


def test_swap_in_without_room_changes_nothing() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=1, block_size=2)
    src = PrefixCachingBlockAllocator(num_blocks=4, block_size=2)
    blocks = src.allocate_immutable_blocks(None, [[1, 2], [3, 4]])
    src.swap_out(blocks)
    before = snapshot(alloc, blocks)
    with pytest.raises(NoFreeBlocksError):
        alloc.swap_in(blocks)
    assert snapshot(alloc, blocks) == before


def test_device_aware_misuse() -> None:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 4, 2, 2)
    gpu_chain = alloc.allocate_immutable_blocks(None, [[1, 2], [3, 4]], Device.GPU)
    cpu_block = alloc.allocate_mutable_block(None, Device.CPU)
    freed = alloc.allocate_mutable_block(None, Device.GPU)
    alloc.free(freed)
    other = CpuGpuBlockAllocator.create("prefix_caching", 4, 2, 2)
    foreign = other.allocate_mutable_block(None, Device.GPU)
    blocks = {"g0": gpu_chain[0], "g1": gpu_chain[1], "c": cpu_block, "freed": freed}
    null = alloc.allocate_or_get_null_block()

    class Fake:
        name = "GPU"

    cases: list[tuple[type[BaseException], Callable[[], object]]] = [
        (UnknownDeviceError, lambda: alloc.allocate_mutable_block(None, None)),  # type: ignore[arg-type]
        (KeyError, lambda: alloc.allocate_mutable_block(None, Fake())),  # type: ignore[arg-type]
        (UnknownDeviceError, lambda: alloc.get_num_free_blocks("GPU")),  # type: ignore[arg-type]
        (UnknownDeviceError, lambda: alloc.get_prefix_cache_hit_rate(None)),  # type: ignore[arg-type]
        (UnknownDeviceError, lambda: alloc.swap(gpu_chain, Device.GPU, None)),  # type: ignore[arg-type]
        (SwapError, lambda: alloc.swap(gpu_chain, Device.GPU, Device.GPU)),
        (SwapError, lambda: alloc.swap([cpu_block], Device.GPU, Device.CPU)),
        (SwapError, lambda: alloc.swap([gpu_chain[0], cpu_block], Device.GPU, Device.CPU)),
        (SwapError, lambda: alloc.swap([freed], Device.GPU, Device.CPU)),
        (SwapError, lambda: alloc.swap([foreign], Device.GPU, Device.CPU)),
        (InvalidArgumentError, lambda: alloc.swap([gpu_chain[0]] * 2, Device.GPU, Device.CPU)),
        (NoFreeBlocksError, lambda: alloc.swap(gpu_chain, Device.GPU, Device.CPU)),
        (DoubleFreeError, lambda: alloc.free(freed)),
        (InvalidBlockError, lambda: alloc.free(foreign)),
        (
            InvalidBlockError,
            lambda: alloc.free(PrefixCachingBlock(None, [], 2, alloc._allocators[Device.GPU])),
        ),  # type: ignore[arg-type]
        (ForkError, lambda: alloc.fork(freed)),
        (ForkError, lambda: alloc.fork(null)),
        (UnknownBlockIdError, lambda: alloc.get_block_device(99)),
        (UnknownBlockIdError, lambda: alloc.get_block_refcount(99)),
        (UnknownBlockIdError, lambda: alloc.mark_blocks_as_accessed([4], 1.0)),  # a CPU id
        (ImmutableBlockError, lambda: null.append_token_ids([1])),
        (InvalidBlockError, lambda: setattr(null, "block_id", 3)),
    ]
    for index, (error, op) in enumerate(cases):
        try:
            assert_atomic(alloc, blocks, error, op)
        except BaseException as exc:
            raise AssertionError(f"case {index} ({error.__name__})") from exc
