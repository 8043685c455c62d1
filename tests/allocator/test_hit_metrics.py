"""Hit-rate counters count admission queries only (docs/CONTRACT.md, "Metrics"): a swap-in, a fork
or a copy-on-write re-registers blocks the engine already holds and is no cache query."""

from __future__ import annotations

import pytest

from prefixcache import BlockTable, CpuGpuBlockAllocator, Device
from prefixcache.prefix_caching_block import PrefixCachingBlockAllocator


def _fields(alloc: CpuGpuBlockAllocator, device: Device) -> tuple[int, int]:
    allocator = alloc._allocators[device]
    assert isinstance(allocator, PrefixCachingBlockAllocator)
    data = allocator.metric_data
    return data.num_incompleted_block_queries, data.num_incompleted_block_hit


def test_swap_round_trip_keeps_the_hit_rate() -> None:
    """0.0 after the allocation's two misses, still 0.0 after GPU->CPU->GPU
    (upstream: 0.5, the swap-in's two hits on the evictable GPU ids)."""
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 4, 4, 4)
    table = BlockTable(4, alloc)
    table.allocate(list(range(8)))
    assert alloc.get_prefix_cache_hit_rate(Device.GPU) == 0.0
    for src, dst in ((Device.GPU, Device.CPU), (Device.CPU, Device.GPU)):
        alloc.swap(table.blocks, src, dst)
        table.update(table.blocks)
    assert alloc.get_prefix_cache_hit_rate(Device.GPU) == 0.0
    assert _fields(alloc, Device.GPU) == (2, 0)
    assert _fields(alloc, Device.CPU) == (0, 0)
    assert table.physical_block_ids == [0, 1]  # the swap-in still hit the cached ids


@pytest.mark.parametrize("shared", [False, True])
def test_swap_in_onto_a_cached_id_is_no_query(shared: bool) -> None:
    """Swapping in content cached on an active id (another table holds it) shares that id
    without counting a hit; a swap-in that misses counts no miss."""
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 4, 4, 4)
    table = BlockTable(4, alloc)
    table.allocate(list(range(4)))
    alloc.swap(table.blocks, Device.GPU, Device.CPU)
    table.update(table.blocks)
    other = BlockTable(4, alloc)
    if shared:
        other.allocate(list(range(4)))  # a hit on the evictable id the swap-out left
    queries = _fields(alloc, Device.GPU)
    alloc.swap(table.blocks, Device.CPU, Device.GPU)
    table.update(table.blocks)
    assert _fields(alloc, Device.GPU) == queries
    if shared:
        assert table.physical_block_ids == other.physical_block_ids


def test_fork_and_copy_on_write_are_no_queries() -> None:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 8, 0, 4)
    table = BlockTable(4, alloc)
    table.allocate(list(range(6)))  # one miss, a partial tail
    before = _fields(alloc, Device.GPU)
    fork = table.fork()
    fork.append_token_ids([7])  # copy-on-write of the shared tail
    assert alloc.clear_copy_on_writes()
    assert _fields(alloc, Device.GPU) == before == (1, 0)
