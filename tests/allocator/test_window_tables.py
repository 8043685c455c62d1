"""Sliding-window tables fork, swap out and back, free, append and read back their in-window
tokens (docs/CONTRACT.md, "Sliding windows"); the null block is never swapped, freed, copied
or counted, and no surviving block links outside its table."""

from __future__ import annotations

from unittest.mock import Mock

import pytest

from prefixcache import BlockTable, CpuGpuBlockAllocator, Device, ForkError, InvalidArgumentError
from prefixcache.block_table import _detach_prev
from prefixcache.interfaces import Block

TYPES = ["naive", "prefix_caching"]


def _windowed(allocator_type: str) -> tuple[CpuGpuBlockAllocator, BlockTable]:
    """Block size 4, window 2; 8 tokens, 8 more (computed 8), then one
    (computed 16): blocks 0 and 1 are dropped, tokens 8..16 stay in 3 blocks."""
    alloc = CpuGpuBlockAllocator.create(allocator_type, 16, 16, 4)
    table = BlockTable(block_size=4, block_allocator=alloc, max_block_sliding_window=2)
    table.allocate(list(range(8)))
    table.append_token_ids(list(range(8, 16)), num_computed_slots=8)
    table.append_token_ids([16], num_computed_slots=16)
    return alloc, table


def _links_stay_inside(table: BlockTable, null: object) -> None:
    blocks = table.blocks
    for index, block in enumerate(blocks):
        if block is null:
            continue
        prev = block.prev_block
        assert prev is (None if index == 0 or blocks[index - 1] is null else blocks[index - 1])


@pytest.mark.parametrize("allocator_type", TYPES)
def test_the_repro_forks_swaps_and_reads_back(allocator_type: str) -> None:
    alloc, table = _windowed(allocator_type)
    null = alloc.null_block
    assert [b is null for b in table.blocks] == [True, True, False, False, False]
    assert table._get_all_token_ids() == list(range(8, 17))
    _links_stay_inside(table, null)
    gpu_free = alloc.get_num_free_blocks(Device.GPU)  # 16 - null - 3

    fork = table.fork()
    assert fork.blocks[:2] == [null, null] and fork.num_full_slots == table.num_full_slots == 17
    assert fork.physical_block_ids == table.physical_block_ids
    assert fork._get_all_token_ids() == list(range(8, 17))
    assert alloc.get_num_free_blocks(Device.GPU) == gpu_free == 12
    _links_stay_inside(fork, null)
    assert null is not None and null.block_id is not None
    assert alloc.get_block_refcount(null.block_id) == 1  # never forked

    ids = table.physical_block_ids[2:]
    out = alloc.swap(table.blocks, Device.GPU, Device.CPU)
    table.update(table.blocks)
    assert sorted(out) == sorted(ids)  # the null block is not in the mapping
    assert table.blocks[:2] == [null, null] and table.physical_block_ids[:2] == [null.block_id] * 2
    assert alloc.get_num_free_blocks(Device.CPU) == 13  # three blocks, the null block stays
    back = alloc.swap(table.blocks, Device.CPU, Device.GPU)
    table.update(table.blocks)
    assert sorted(back) == sorted(out.values())
    assert table._get_all_token_ids() == list(range(8, 17))
    assert alloc.get_num_free_blocks(Device.CPU) == 16

    table.append_token_ids([17, 18, 19, 20], num_computed_slots=17)
    fork.append_token_ids([99], num_computed_slots=17)  # copy-on-write of the shared tail
    assert table._get_all_token_ids() == list(range(8, 21))
    assert fork._get_all_token_ids() == [*range(8, 17), 99]
    _links_stay_inside(table, null)
    table.free()
    fork.free()
    assert alloc.get_num_free_blocks(Device.GPU) == 15  # all but the null block
    assert alloc.get_block_refcount(null.block_id) == 1


@pytest.mark.parametrize("allocator_type", TYPES)
def test_the_null_block_is_not_counted_or_swapped(allocator_type: str) -> None:
    alloc, table = _windowed(allocator_type)
    null = alloc.null_block
    assert null is not None
    real = table.blocks[2:]
    for device in Device:
        assert alloc.get_num_blocks_touched(table.blocks, device, 4) == \
            alloc.get_num_blocks_touched(real, device, 4)
        assert alloc.get_num_full_blocks_touched(table.blocks, device) == \
            alloc.get_num_full_blocks_touched(real, device)
    assert alloc.swap([null, null], Device.GPU, Device.CPU) == {}
    assert null.block_id is not None and alloc.get_block_device(null.block_id) is Device.GPU


@pytest.mark.parametrize("allocator_type", TYPES)
def test_a_recycled_block_object_never_joins_the_window(allocator_type: str) -> None:
    """The dropped blocks' objects go back to the pool: a later table reuses them, and the
    windowed table's chain (and so its fork) must not reach them (vLLM 0.8 forks a cycle)."""
    alloc, table = _windowed(allocator_type)
    others = []
    for start in range(100, 140, 4):
        other = BlockTable(4, alloc)
        other.allocate(list(range(start, start + 3)))
        others.append(other)
    fork = table.fork()
    assert len(fork.blocks) == 5 and fork._get_all_token_ids() == list(range(8, 17))
    fork.append_token_ids([1, 2, 3, 4, 5], num_computed_slots=17)
    assert fork._get_all_token_ids() == [*range(8, 17), 1, 2, 3, 4, 5]


def test_a_dropped_prefix_keeps_the_window_hashes() -> None:
    """The first block that stays keeps its chained content hash: the same tokens as a
    first block elsewhere do not share its id."""
    alloc, table = _windowed("prefix_caching")
    survivor = table.blocks[2]
    hash_before = survivor.content_hash
    fresh = BlockTable(4, alloc)
    fresh.allocate(list(range(8, 12)))
    assert survivor.content_hash == hash_before is not None
    assert fresh.physical_block_ids[0] != survivor.block_id


@pytest.mark.parametrize("allocator_type", TYPES)
def test_a_drop_beyond_the_tokens_that_cuts_a_written_block_is_refused(allocator_type: str) -> None:
    alloc, table = _windowed(allocator_type)  # 17 tokens: block 4 holds one
    with pytest.raises(InvalidArgumentError):
        table.append_token_ids([17], num_computed_slots=24)  # 24 // 4 - 2 = 4: drops block 3
    assert table.num_full_slots == 17 and alloc.null_block is table.blocks[0]


@pytest.mark.parametrize("allocator_type", TYPES)
def test_a_chain_that_leaves_the_table_is_not_forked(allocator_type: str) -> None:
    """Defensive: a kept block linked outside the table (a third-party block class cannot be
    cut loose) makes fork refuse, with every reference it took given back."""
    alloc, table = _windowed(allocator_type)
    other = BlockTable(4, alloc)
    other.allocate([7, 7, 7, 7])
    table.blocks[2]._prev_block = other.blocks[0]  # type: ignore[attr-defined]
    before = (alloc.get_num_free_blocks(Device.GPU),
              [alloc.get_block_refcount(i) for i in table.physical_block_ids])
    with pytest.raises(ForkError):
        table.fork()
    assert before == (alloc.get_num_free_blocks(Device.GPU),
                      [alloc.get_block_refcount(i) for i in table.physical_block_ids])


def test_a_third_party_block_keeps_its_link() -> None:
    """The drop cuts the link only of the bundled block classes (others have no setter)."""
    prev = object()
    block = Mock(spec=Block, prev_block=prev)
    _detach_prev(block)
    assert block.prev_block is prev
