"""Rarely taken paths: corrupted handles, extension defaults, encoding corners."""

from __future__ import annotations

import pytest

from prefixcache import (
    BlockFullError,
    BlockTable,
    CpuGpuBlockAllocator,
    Device,
    ForkError,
    InvalidArgumentError,
    InvalidBlockError,
    NaiveBlock,
    NaiveBlockAllocator,
    NoFreeBlocksError,
    PrefixCachingBlockAllocator,
    UnknownBlockIdError,
    hash_block_tokens,
)
from prefixcache.interfaces import BlockAllocator, DeviceAwareBlockAllocator

from ._state import snapshot


@pytest.mark.parametrize("kind", ["naive", "prefix"])
def test_corrupted_handles_are_rejected_without_changes(kind: str) -> None:
    alloc: NaiveBlockAllocator | PrefixCachingBlockAllocator = (
        NaiveBlockAllocator(NaiveBlock, 4, 2)
        if kind == "naive"
        else PrefixCachingBlockAllocator(4, 2)
    )
    block = alloc.allocate_mutable_block(None)
    bogus = alloc.allocate_mutable_block(None)
    bogus.block_id = 99  # held by this allocator, but with an id it does not own
    stale = alloc.allocate_mutable_block(None)
    stale_id = stale.block_id
    alloc.free(stale, keep_block_object=True)
    stale.block_id = stale_id  # pretends to hold an id whose refcount is 0
    alias = alloc.fork(block)[0]
    alloc.free(alias, keep_block_object=True)
    alias.block_id = block.block_id  # two handles, one reference
    before = snapshot(alloc, [block])
    for error, op in [
        (UnknownBlockIdError, lambda: alloc.free(bogus)),
        (UnknownBlockIdError, lambda: alloc.fork(bogus)),
        (ForkError, lambda: alloc.fork(stale)),
        (InvalidBlockError, lambda: alloc.free(stale)),
        (InvalidBlockError, lambda: alloc.swap_out([block, alias])),
    ]:
        with pytest.raises(error):
            op()
        assert snapshot(alloc, [block]) == before


def test_free_block_id_releases_one_reference() -> None:
    alloc = NaiveBlockAllocator(NaiveBlock, 2, 2)
    block = alloc.allocate_mutable_block(None)
    alloc.fork(block)
    alloc.free_block_id(0)
    assert alloc.refcounter.get(0) == 1 and alloc.get_num_free_blocks() == 1
    alloc.free_block_id(0)
    assert list(alloc._free_block_indices) == [0, 1]


def test_promoting_an_already_cached_block_is_a_no_op() -> None:
    alloc = PrefixCachingBlockAllocator(4, 2)
    block = alloc.allocate_immutable_block(None, [1, 2])
    before = snapshot(alloc, [block])
    assert alloc.promote_to_immutable_block(block) == block.block_id
    assert snapshot(alloc, [block]) == before


def test_marking_a_free_id_as_accessed_is_rejected() -> None:
    alloc = PrefixCachingBlockAllocator(4, 2)
    alloc.allocate_mutable_block(None)
    before = snapshot(alloc)
    with pytest.raises(InvalidBlockError):
        alloc.mark_blocks_as_accessed([0, 1], 1.0)
    assert snapshot(alloc) == before


def test_swap_in_of_blocks_larger_than_the_block_size() -> None:
    big = PrefixCachingBlockAllocator(4, 4)
    small = PrefixCachingBlockAllocator(4, 2)
    blocks = big.allocate_immutable_blocks(None, [[1, 2, 3, 4]])
    big.swap_out(blocks)
    with pytest.raises(BlockFullError):
        small.swap_in(blocks)
    assert small.get_num_free_blocks() == 4 and blocks[0].block_id is None


def test_extension_defaults_raise_or_report_nothing() -> None:
    alloc = PrefixCachingBlockAllocator(2, 2)
    for op in (
        lambda: BlockAllocator.get_block_refcount(alloc, 0),
        lambda: BlockAllocator.get_num_free_blocks_needed(alloc, None, []),
        lambda: BlockAllocator.get_num_free_blocks_needed_for_swap_in(alloc, []),
    ):
        with pytest.raises(NotImplementedError):
            op()
    both = CpuGpuBlockAllocator.create("naive", 2, 2, 2)
    for op in (
        lambda: DeviceAwareBlockAllocator.get_block_refcount(both, 0),
        lambda: DeviceAwareBlockAllocator.get_block_device(both, 0),
        lambda: DeviceAwareBlockAllocator.get_num_free_blocks_needed(both, None, [], Device.GPU),
    ):
        with pytest.raises(NotImplementedError):
            op()
    assert DeviceAwareBlockAllocator.null_block.fget(both) is None  # type: ignore[attr-defined]


class _NoAdmission(CpuGpuBlockAllocator):
    """A device-aware allocator without the admission extensions."""

    def get_num_free_blocks_needed(self, *args: object, **kwargs: object) -> int:
        raise NotImplementedError

    def get_block_refcount(self, block_id: int) -> int:
        raise NotImplementedError


def test_table_falls_back_to_upstream_behaviour_without_admission_support() -> None:
    base = CpuGpuBlockAllocator.create("naive", 1, 0, 2)
    alloc = _NoAdmission(base._allocators[Device.CPU], base._allocators[Device.GPU])
    table = BlockTable(2, alloc)
    table.allocate([1, 2])
    other = BlockTable(2, alloc)
    with pytest.raises(NoFreeBlocksError):
        other.allocate([3, 4])
    table.free()
    table.allocate([1])
    fork = table.fork()
    with pytest.raises(NoFreeBlocksError):  # the copy-on-write fails inside the append
        fork.append_token_ids([2])


def test_window_cannot_drop_the_block_being_written() -> None:
    alloc = CpuGpuBlockAllocator.create("naive", 8, 0, 2)
    table = BlockTable(2, alloc, max_block_sliding_window=1)
    table.allocate([1, 2, 3])
    table.ensure_num_empty_slots(3)  # blocks: [1, 2] [3, _] [_, _]
    before = snapshot(alloc, tables=[table])
    with pytest.raises(InvalidArgumentError):  # 6 // 2 - 1 = 2: drops the block written to
        table.append_token_ids([4], num_computed_slots=6)
    assert snapshot(alloc, tables=[table]) == before


def test_window_drop_of_a_shared_block_returns_no_id() -> None:
    alloc = CpuGpuBlockAllocator.create("naive", 6, 0, 2)
    table = BlockTable(2, alloc, max_block_sliding_window=1)
    table.allocate([1, 2, 3, 4])
    fork = table.fork()  # every block shared
    table.append_token_ids([5], num_computed_slots=4)  # null(1) + new(1); the drop frees none
    assert alloc.get_num_free_blocks(Device.GPU) == 2
    table.append_token_ids([6], num_computed_slots=5)  # fills block 2, drops nothing new
    table.append_token_ids([], num_computed_slots=6)  # drops block 1, still shared
    assert alloc.get_num_free_blocks(Device.GPU) == 2
    assert fork.physical_block_ids == [0, 1]
    filler = [alloc.allocate_mutable_block(None, Device.GPU) for _ in range(2)]
    before = snapshot(alloc, filler, tables=[table, fork])
    with pytest.raises(NoFreeBlocksError):
        table.append_token_ids([7], num_computed_slots=6)  # needs 1, nothing comes back
    assert snapshot(alloc, filler, tables=[table, fork]) == before


def test_block_ids_and_tokens_must_not_be_strings() -> None:
    for ids in ("ab", 5, 1.5, object()):  # a string, or not iterable at all
        with pytest.raises(InvalidArgumentError):
            NaiveBlockAllocator(NaiveBlock, 2, 2, block_ids=ids)  # type: ignore[arg-type]
    alloc = NaiveBlockAllocator(NaiveBlock, 2, 2)
    for tokens in ("ab", {1: 2}, {1}, 5):
        with pytest.raises(InvalidArgumentError):
            NaiveBlock(None, tokens, 4, alloc)  # type: ignore[arg-type]


def test_tokens_needing_a_multi_byte_length_prefix() -> None:
    huge = 2**1100
    assert hash_block_tokens(True, None, [huge]) != hash_block_tokens(True, None, [huge + 1])
    assert hash_block_tokens(True, None, [huge]) == hash_block_tokens(True, None, [huge])
