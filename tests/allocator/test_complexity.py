"""Costs that must not grow with the pool: structural checks plus a loose timing ratio."""

from __future__ import annotations

import time

from prefixcache import CpuGpuBlockAllocator, Device, PrefixCachingBlockAllocator


def test_id_sets_are_built_once() -> None:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 64, 32, 4)
    assert alloc.all_block_ids is alloc.all_block_ids
    gpu = alloc._allocators[Device.GPU]
    assert gpu.all_block_ids is gpu.all_block_ids


def _per_call_ns(alloc: PrefixCachingBlockAllocator, ids: list[int]) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for block_id in ids:
            alloc.get_physical_block_id(block_id)
        best = min(best, (time.perf_counter_ns() - start) / len(ids))
    return best


def test_physical_id_lookup_does_not_scale_with_the_pool() -> None:
    small = PrefixCachingBlockAllocator(num_blocks=1_000, block_size=16)
    large = PrefixCachingBlockAllocator(num_blocks=100_000, block_size=16)
    ids = list(range(0, 1_000, 3))
    # A sort-per-call implementation is ~100x slower on the large pool; allow 10x noise.
    assert _per_call_ns(large, ids) < 10 * _per_call_ns(small, ids)


def test_eviction_cost_does_not_scale_with_the_evictor() -> None:
    def evict_time(n: int) -> float:
        alloc = PrefixCachingBlockAllocator(num_blocks=n, block_size=1)
        blocks = alloc.allocate_immutable_blocks(None, [[i] for i in range(n)])
        for i, block in enumerate(blocks):
            alloc.mark_blocks_as_accessed([block.block_id], float(n - i))  # type: ignore[list-item]
            alloc.free(block)
        start = time.perf_counter_ns()
        for _ in range(500):
            alloc.allocate_mutable_block(None)
        return (time.perf_counter_ns() - start) / 500

    # Out-of-order times force a full scan per eviction in a scanning evictor.
    assert min(evict_time(50_000) for _ in range(2)) < 10 * min(evict_time(1_000) for _ in range(2))
