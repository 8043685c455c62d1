"""The hot paths (plain-int token lists, in-place table appends, flat prefix blocks) must
behave exactly like the general paths they short-cut: same results, same typed errors,
nothing changed on failure."""

from __future__ import annotations

import enum
from unittest import mock

import pytest

from prefixcache import (
    BlockTable,
    CpuGpuBlockAllocator,
    Device,
    InvalidArgumentError,
    InvalidBlockError,
    PrefixCachingBlock,
    PrefixCachingBlockAllocator,
)
from prefixcache._validation import checked_tokens

from ._state import snapshot


class _Tok(enum.IntEnum):
    A = 7


def test_checked_tokens_slow_path_converts_index_like_values() -> None:
    assert checked_tokens(iter([1, 2])) == [1, 2]
    converted = checked_tokens([_Tok.A, 3])
    assert converted == [7, 3] and type(converted[0]) is int
    fast = [4, 5]
    copy = checked_tokens(fast)
    assert copy == fast and copy is not fast
    with pytest.raises(InvalidArgumentError):
        checked_tokens([1, True])


def test_block_rejects_bad_block_size() -> None:
    alloc = PrefixCachingBlockAllocator(2, 2)
    for size in (0, -1, True, 2.0):
        with pytest.raises(InvalidArgumentError):
            PrefixCachingBlock(None, [], size, alloc)  # type: ignore[arg-type]


def test_token_totals_through_subclass_and_mock_predecessors() -> None:
    alloc = PrefixCachingBlockAllocator(4, 2)

    class Sub(PrefixCachingBlock):
        __slots__ = ()

    first = Sub(None, [1, 2], 2, alloc)
    second = PrefixCachingBlock(first, [3], 2, alloc)
    assert second.num_tokens_total == 3
    spec = mock.Mock(spec=PrefixCachingBlock)
    spec.num_tokens_total = 10
    after_mock = PrefixCachingBlock(spec, [4], 2, alloc)
    assert after_mock.num_tokens_total == 11


def _table(block_size: int = 4, gpu: int = 4) -> tuple[CpuGpuBlockAllocator, BlockTable]:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", gpu, 2, block_size)
    return alloc, BlockTable(block_size, alloc)


@pytest.mark.parametrize("lookahead", [0, 6])
def test_stale_block_is_rejected_on_both_append_paths(lookahead: int) -> None:
    """In place (one block, no lookahead) and general (lookahead needs a new block)."""
    alloc, table = _table()
    table.allocate([1, 2], device=Device.GPU)
    block = table.blocks[-1]
    block_id = block.block_id
    alloc.free(block)
    block.block_id = block_id  # a stale handle: its id has refcount 0
    before = snapshot(alloc)
    with pytest.raises(InvalidBlockError):
        table.append_token_ids([3], num_lookahead_slots=lookahead)
    assert snapshot(alloc) == before and table.num_full_slots == 2


def test_in_place_append_copies_on_write_and_promotes() -> None:
    alloc, table = _table(block_size=2, gpu=6)
    table.allocate([1], device=Device.GPU)
    child = table.fork()
    shared = table.physical_block_ids[0]
    child.append_token_ids([2])  # copy on write, then full: promoted to the cache
    assert child.physical_block_ids[0] != shared
    assert alloc.clear_copy_on_writes() == [(shared, child.physical_block_ids[0])]
    table.append_token_ids([2])  # same content, now unshared: promoted onto the cached id
    assert table.physical_block_ids == child.physical_block_ids
    assert alloc.get_block_refcount(shared) == 0 or shared == table.physical_block_ids[0]
