"""BlockTable: upstream-pinned behaviour, sliding window, and all-or-nothing growth."""

from __future__ import annotations

import pytest

from prefixcache import (
    BlockTable,
    CpuGpuBlockAllocator,
    Device,
    InvalidArgumentError,
    NoFreeBlocksError,
    NullBlock,
    cdiv,
    chunk_list,
    make_extra_hash,
)

from ._state import snapshot

TYPES = ["naive", "prefix_caching"]


@pytest.mark.parametrize("sequence_len", [1, 16, 129])
def test_allocate_naive_uses_one_block_per_chunk(sequence_len: int) -> None:
    alloc = CpuGpuBlockAllocator.create("naive", 1024, 1024, 16)
    tokens = list(range(sequence_len))
    per_table = len(chunk_list(tokens, 16))
    tables = []
    for i in range(5):
        assert alloc.get_num_free_blocks(Device.GPU) == 1024 - i * per_table
        tables.append(BlockTable(16, alloc))
        tables[-1].allocate(tokens, device=Device.GPU)
        assert len(tables[-1].physical_block_ids) == cdiv(sequence_len, 16)


@pytest.mark.parametrize("sequence_len", [1, 16, 129])
def test_allocate_prefix_caching_shares_full_blocks(sequence_len: int) -> None:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 1024, 1024, 16)
    tokens = list(range(sequence_len))
    chunks = chunk_list(tokens, 16)
    mutable = 0 if len(chunks[-1]) == 16 else 1
    immutable = len(chunks) - mutable
    for i in range(1, 6):
        BlockTable(16, alloc).allocate(tokens, device=Device.GPU)
        assert alloc.get_num_free_blocks(Device.GPU) == 1024 - (immutable + mutable * i)


@pytest.mark.parametrize("sequence_len", [1, 16, 129])
@pytest.mark.parametrize("allocator_type", TYPES)
@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_allocate_free_cycles(sequence_len: int, allocator_type: str, device: str) -> None:
    dev = Device[device.upper()]
    alloc = CpuGpuBlockAllocator.create(allocator_type, 1024, 1024, 16)
    tokens = list(range(sequence_len))
    table = BlockTable(16, alloc)
    for _ in range(5):
        table.allocate(tokens, device=dev)
        assert alloc.get_num_free_blocks(dev) == 1024 - cdiv(sequence_len, 16)
        assert all(block_id is not None for block_id in table.physical_block_ids)
        table.free()
        assert alloc.get_num_free_blocks(dev) == 1024
        assert table.physical_block_ids == [] and table._get_all_token_ids() == []


@pytest.mark.parametrize("block_size", [1, 8])
@pytest.mark.parametrize("sequence_len", [1, 16, 129])
@pytest.mark.parametrize("append_len", [1, 16, 129])
@pytest.mark.parametrize("allocator_type", TYPES)
def test_append_grows_to_the_chunk_count(
    block_size: int, sequence_len: int, append_len: int, allocator_type: str
) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, 1024, 1024, block_size)
    tokens, extra = list(range(sequence_len)), list(range(append_len))
    table = BlockTable(block_size, alloc)
    table.allocate(tokens, device=Device.GPU)
    assert len(table.physical_block_ids) == len(chunk_list(tokens, block_size))
    table.append_token_ids(extra)
    assert len(table.physical_block_ids) == len(chunk_list(tokens + extra, block_size))
    assert table.num_full_slots == sequence_len + append_len


@pytest.mark.parametrize("block_size", [1, 8])
@pytest.mark.parametrize("sequence_len", [1, 16, 129])
@pytest.mark.parametrize("num_empty_slots", [1, 16, 129])
@pytest.mark.parametrize("allocator_type", TYPES)
def test_ensure_empty_slots_then_fill_them_for_free(
    block_size: int, sequence_len: int, num_empty_slots: int, allocator_type: str
) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, 1024, 1024, block_size)
    tokens = list(range(sequence_len))
    table = BlockTable(block_size, alloc)
    table.allocate(tokens, device=Device.GPU)
    before = len(table.physical_block_ids)
    table.ensure_num_empty_slots(num_empty_slots)
    added = cdiv(sequence_len + num_empty_slots, block_size) - cdiv(sequence_len, block_size)
    assert len(table.physical_block_ids) == before + added
    free = alloc.get_num_free_blocks(Device.GPU)
    table.append_token_ids(list(range(num_empty_slots)))
    assert alloc.get_num_free_blocks(Device.GPU) == free


@pytest.mark.parametrize("block_size", [1, 8])
@pytest.mark.parametrize("sequence_len", [1, 9])
@pytest.mark.parametrize("append_len", [1, 16, 129])
@pytest.mark.parametrize("append_size", [1, 4, 129])
@pytest.mark.parametrize("allocator_type", TYPES)
def test_appended_content_is_exact(
    block_size: int, sequence_len: int, append_len: int, append_size: int, allocator_type: str
) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, 1024, 1024, block_size)
    tokens, extra = list(range(sequence_len)), list(range(append_len))
    table = BlockTable(block_size, alloc)
    table.allocate(tokens, device=Device.GPU)
    so_far: list[int] = []
    for piece in chunk_list(extra, append_size):
        table.append_token_ids(piece)
        so_far.extend(piece)
        assert table._get_all_token_ids() == tokens + so_far
    table.append_token_ids([])
    assert table._get_all_token_ids() == tokens + extra


@pytest.mark.parametrize("seq_len", [1, 9, 129])
@pytest.mark.parametrize("block_size", [1, 8])
@pytest.mark.parametrize("allocator_type", TYPES)
def test_fork_shares_everything(seq_len: int, block_size: int, allocator_type: str) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, 1024, 0, block_size)
    table = BlockTable(block_size, alloc)
    table.allocate(list(range(seq_len)))
    free = alloc.get_num_free_blocks(Device.GPU)
    forked = table.fork()
    assert forked.physical_block_ids == table.physical_block_ids
    assert forked._get_all_token_ids() == table._get_all_token_ids()
    assert forked.num_full_slots == table.num_full_slots
    assert alloc.get_num_free_blocks(Device.GPU) == free
    table.free()
    assert alloc.get_num_free_blocks(Device.GPU) == free
    assert all(block_id is not None for block_id in forked.physical_block_ids)
    forked.free()
    assert alloc.get_num_free_blocks(Device.GPU) == 1024


@pytest.mark.parametrize("sequence_len", [1, 16, 129])
@pytest.mark.parametrize("append_len", [1, 16, 129])
@pytest.mark.parametrize("appender", ["forked", "original"])
@pytest.mark.parametrize("allocator_type", TYPES)
def test_copy_on_write_after_fork(
    sequence_len: int, append_len: int, appender: str, allocator_type: str
) -> None:
    bs = 8
    alloc = CpuGpuBlockAllocator.create(allocator_type, 1024, 0, bs)
    original = BlockTable(bs, alloc)
    original.allocate(list(range(sequence_len)), device=Device.GPU)
    original_ids = original.physical_block_ids[:]
    forked = original.fork()
    assert alloc.get_num_free_blocks(Device.GPU) == 1024 - cdiv(sequence_len, bs)
    writer, static = (forked, original) if appender == "forked" else (original, forked)
    writer.append_token_ids(list(range(append_len)))
    assert static.physical_block_ids == original_ids
    assert writer.physical_block_ids != original_ids
    copies = cdiv(sequence_len + append_len, bs) - sequence_len // bs
    assert alloc.get_num_free_blocks(Device.GPU) == 1024 - (cdiv(sequence_len, bs) + copies)
    cows = alloc.clear_copy_on_writes()
    if sequence_len % bs:
        index = sequence_len // bs
        assert (static.physical_block_ids[index], writer.physical_block_ids[index]) in cows
    else:
        assert cows == []
    static.free()
    writer.free()
    assert alloc.get_num_free_blocks(Device.GPU) == 1024


@pytest.mark.parametrize("sequence_len", [1, 16, 129])
@pytest.mark.parametrize("append_len", [1, 16, 129])
@pytest.mark.parametrize("lookahead", [1, 16, 129])
@pytest.mark.parametrize("allocator_type", TYPES)
def test_copy_on_write_with_lookahead(
    sequence_len: int, append_len: int, lookahead: int, allocator_type: str
) -> None:
    bs = 8
    alloc = CpuGpuBlockAllocator.create(allocator_type, 1024, 0, bs)
    original = BlockTable(bs, alloc)
    original.allocate(list(range(sequence_len)), device=Device.GPU)
    original.ensure_num_empty_slots(lookahead)
    original_ids = original.physical_block_ids[:]
    forked = original.fork()
    forked.append_token_ids(list(range(append_len)))
    assert original.physical_block_ids == original_ids
    assert forked.physical_block_ids != original_ids
    cows = alloc.clear_copy_on_writes()
    assert cows
    if sequence_len % bs:
        index = sequence_len // bs
        assert (original.physical_block_ids[index], forked.physical_block_ids[index]) in cows
    original.free()
    forked.free()
    assert alloc.get_num_free_blocks(Device.GPU) == 1024


@pytest.mark.parametrize("block_size", [1, 8])
@pytest.mark.parametrize("sequence_len", [1, 16, 129])
@pytest.mark.parametrize("num_new_tokens", [1, 16, 129])
@pytest.mark.parametrize("lookahead", [0, 1, 7, 8])
@pytest.mark.parametrize("allocator_type", TYPES)
def test_blocks_touched_by_append_bounds_consumption(
    block_size: int, sequence_len: int, num_new_tokens: int, lookahead: int, allocator_type: str
) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, 1024, 0, block_size)
    table = BlockTable(block_size, alloc)
    table.allocate(list(range(sequence_len)), device=Device.GPU)
    table.ensure_num_empty_slots(lookahead)
    table.fork()
    expected = table.get_num_blocks_touched_by_append_slots(list(range(num_new_tokens)), lookahead)
    free = alloc.get_num_free_blocks(Device.GPU)
    table.append_token_ids(list(range(num_new_tokens)), lookahead)
    consumed = free - alloc.get_num_free_blocks(Device.GPU)
    if lookahead:
        assert consumed <= expected
    elif allocator_type == "naive":
        assert consumed == expected


def test_small_helpers() -> None:
    assert BlockTable.get_num_required_blocks([1] * 9, 4) == 3
    assert BlockTable.get_num_required_blocks([1] * 9, 4, num_lookahead_slots=3) == 3
    assert BlockTable.get_num_required_blocks([1] * 9, 4, num_lookahead_slots=4) == 4
    alloc = CpuGpuBlockAllocator.create("naive", 8, 0, 4)
    table = BlockTable(4, alloc)
    assert table._get_all_token_ids() == [] and table.blocks == []
    table.free()  # not allocated: nothing to do
    table.allocate([1, 2, 3, 4, 5])
    assert table.get_unseen_token_ids([1, 2, 3, 4, 5, 6, 7]) == [6, 7]
    assert table.physical_block_ids is table.physical_block_ids
    assert table.get_num_blocks_touched_by_append_slots([1], 0) == 1
    assert table.get_num_blocks_touched_by_append_slots([1, 2, 3, 4], 0) == 2
    other = BlockTable(4, alloc)
    other.allocate([9])
    table.update(other.blocks)
    assert table.physical_block_ids == other.physical_block_ids


def test_extra_hash_flows_into_the_blocks() -> None:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 16, 0, 2)
    extra = make_extra_hash(lora_id=5)
    plain, keyed = BlockTable(2, alloc), BlockTable(2, alloc)
    plain.allocate([1, 2, 3])
    keyed.allocate([1, 2, 3], extra_hash=extra)
    assert plain.physical_block_ids[0] != keyed.physical_block_ids[0]
    keyed.append_token_ids([4, 5, 6], extra_hash=extra)
    assert all(b.extra_hash == extra for b in keyed.blocks[:2])
    assert keyed.blocks[-1].extra_hash == extra


@pytest.mark.parametrize("allocator_type", TYPES)
def test_table_misuse_and_running_out_change_nothing(allocator_type: str) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, 4, 0, 2)
    table = BlockTable(2, alloc)
    with pytest.raises(InvalidArgumentError):
        table.append_token_ids([1])
    with pytest.raises(InvalidArgumentError):
        table.ensure_num_empty_slots(1)
    with pytest.raises(InvalidArgumentError):
        table.fork()
    with pytest.raises(InvalidArgumentError):
        table.allocate([])
    before = snapshot(alloc, tables=[table])
    with pytest.raises(NoFreeBlocksError):
        table.allocate(list(range(9)))  # needs 5 blocks, 4 exist
    assert snapshot(alloc, tables=[table]) == before
    table.allocate([1, 2, 3])
    with pytest.raises(InvalidArgumentError):
        table.allocate([1])
    fork = table.fork()
    state = lambda: snapshot(alloc, tables=[table, fork])  # noqa: E731
    before = state()
    for op in (
        lambda: table.append_token_ids(list(range(10))),  # 2 new + 1 copy > 2 free
        lambda: table.ensure_num_empty_slots(7),  # 3 new > 2 free
        lambda: table.append_token_ids([1, 2, 3, 4], num_lookahead_slots=1),  # 2 new + 1 copy
    ):
        with pytest.raises(NoFreeBlocksError):
            op()
        assert state() == before
    with pytest.raises(InvalidArgumentError):
        table.append_token_ids([1], num_lookahead_slots=-1)
    with pytest.raises(InvalidArgumentError):
        table.ensure_num_empty_slots(-1)
    assert state() == before
    table.append_token_ids([4, 5, 6])  # 1 new + 1 copy == 2 free: fits exactly
    assert alloc.get_num_free_blocks(Device.GPU) == 0
    assert table._get_all_token_ids() == [1, 2, 3, 4, 5, 6]


def test_prefix_table_admission_counts_cache_hits() -> None:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 4, 0, 2)
    first = BlockTable(2, alloc)
    first.allocate([1, 2, 3, 4, 5])  # 3 blocks, 1 free
    second = BlockTable(2, alloc)
    before = snapshot(alloc, tables=[first, second])
    with pytest.raises(NoFreeBlocksError):
        second.allocate([1, 2, 3, 4, 5, 6, 7])  # shares 2, needs 1 full + 1 tail
    assert snapshot(alloc, tables=[first, second]) == before
    second.allocate([1, 2, 3, 4, 9])  # shares 2, needs only the tail
    assert alloc.get_num_free_blocks(Device.GPU) == 0
    first.free()
    second.free()
    third = BlockTable(2, alloc)
    third.allocate([1, 2, 3, 4, 5, 6, 7])  # 2 revived from the evictor + 2 fresh
    assert alloc.get_num_free_blocks(Device.GPU) == 0


def test_table_free_rejects_a_block_held_twice() -> None:
    alloc = CpuGpuBlockAllocator.create("naive", 4, 0, 2)
    table = BlockTable(2, alloc)
    table.allocate([1, 2, 3])
    table.update([table.blocks[0], table.blocks[0]])
    before = snapshot(alloc)
    with pytest.raises(InvalidArgumentError):
        table.free()
    assert snapshot(alloc) == before


@pytest.mark.parametrize("allocator_type", TYPES)
def test_sliding_window_swaps_old_blocks_for_the_null_block(allocator_type: str) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, 16, 0, 2)
    table = BlockTable(2, alloc, max_block_sliding_window=2)
    table.allocate([1, 2, 3, 4, 5, 6, 7])
    free = alloc.get_num_free_blocks(Device.GPU)
    with pytest.raises(InvalidArgumentError):
        table.append_token_ids([8])  # a window needs num_computed_slots
    table.append_token_ids([8], num_computed_slots=7)  # 7 // 2 - 2 = 1 block dropped
    null = alloc.null_block
    assert isinstance(null, NullBlock)
    assert table.blocks[0] is null and table.blocks[1] is not null
    assert table.physical_block_ids[0] == null.block_id
    assert alloc.get_num_free_blocks(Device.GPU) == free  # one freed, one taken by null
    table.append_token_ids([9, 10], num_computed_slots=8)
    assert [b is null for b in table.blocks] == [True, True, False, False, False]
    assert table.num_full_slots == 10
    with pytest.raises(InvalidArgumentError):
        table.append_token_ids([1], num_computed_slots=100)
    table.free()
    assert alloc.get_num_free_blocks(Device.GPU) == 15  # all but the null block


def test_sliding_window_admission_counts_returned_blocks() -> None:
    alloc = CpuGpuBlockAllocator.create("naive", 5, 0, 2)
    table = BlockTable(2, alloc, max_block_sliding_window=1)
    table.allocate([1, 2, 3, 4, 5, 6, 7, 8])  # 4 blocks, 1 free
    alloc.allocate_or_get_null_block()  # 0 free
    before = snapshot(alloc, tables=[table])
    with pytest.raises(NoFreeBlocksError):
        table.append_token_ids([9], num_computed_slots=2)  # drops none, needs 1
    assert snapshot(alloc, tables=[table]) == before
    table.append_token_ids([9], num_computed_slots=4)  # drops 1 block, reuses its id
    assert alloc.get_num_free_blocks(Device.GPU) == 0
    assert table._get_all_token_ids()[-1] == 9


def test_sliding_window_needs_a_block_for_the_null_block() -> None:
    alloc = CpuGpuBlockAllocator.create("naive", 2, 0, 2)
    table = BlockTable(2, alloc, max_block_sliding_window=1)
    table.allocate([1, 2, 3, 4])
    before = snapshot(alloc, tables=[table])
    with pytest.raises(NoFreeBlocksError):
        table.append_token_ids([], num_computed_slots=4)
    assert snapshot(alloc, tables=[table]) == before
