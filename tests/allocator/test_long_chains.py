"""Chains far longer than the recursion limit fork, hash and free without recursion."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from prefixcache import (
    BlockTable,
    CpuGpuBlockAllocator,
    Device,
    NaiveBlock,
    NaiveBlockAllocator,
    PrefixCachingBlock,
    PrefixCachingBlockAllocator,
    get_all_blocks_recursively,
)

CHAIN = 5000


@contextmanager
def low_recursion_limit(limit: int = 400) -> Iterator[None]:
    """Make any per-block recursion fail loudly (depth here is far below CHAIN)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, len(_frames()) + 100))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _frames() -> list[object]:
    frame = sys._getframe()
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back  # type: ignore[assignment]
    return frames


def test_prefix_chain_of_5000_blocks() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=2 * CHAIN + 1, block_size=2)
    with low_recursion_limit():
        chain = alloc.allocate_immutable_blocks(None, [[i, i + 1] for i in range(0, 2 * CHAIN, 2)])
        forked = alloc.fork(chain[-1])
        assert len(forked) == CHAIN
        assert [b.block_id for b in forked] == [b.block_id for b in chain]
        assert alloc.get_num_free_blocks() == CHAIN + 1
        assert all(alloc._refcounter.get(i) == 2 for i in range(CHAIN))
        for block in chain:
            alloc.free(block)
        assert alloc.get_num_free_blocks() == CHAIN + 1
        for block in forked:
            alloc.free(block)
        assert alloc.get_num_free_blocks() == 2 * CHAIN + 1
        assert alloc.evictor.num_blocks == CHAIN


def test_lazy_hash_of_a_5000_block_unhashed_chain() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=1, block_size=1)
    with low_recursion_limit():
        prev = None
        blocks = []
        for i in range(CHAIN):
            prev = PrefixCachingBlock(prev, [i], 1, alloc)
            blocks.append(prev)
        last_hash = blocks[-1].content_hash  # walks 5000 unhashed blocks iteratively
        assert last_hash is not None
        assert all(b._cached_content_hash is not None for b in blocks)
        expected = None
        for i in range(CHAIN):
            expected = PrefixCachingBlock.hash_block_tokens(i == 0, expected, [i])
        assert last_hash == expected
        assert blocks[-1].num_tokens_total == CHAIN


def test_naive_chain_of_5000_blocks() -> None:
    alloc = NaiveBlockAllocator(NaiveBlock, num_blocks=2 * CHAIN, block_size=1)
    with low_recursion_limit():
        chain = alloc.allocate_immutable_blocks(None, [[i] for i in range(CHAIN)])
        forked = alloc.fork(chain[-1])
        assert get_all_blocks_recursively(forked[-1]) == forked
        for block in chain + forked:
            alloc.free(block)
        assert alloc.get_num_free_blocks() == 2 * CHAIN


@pytest.mark.parametrize("allocator_type", ["naive", "prefix_caching"])
def test_table_of_5000_blocks_forks_and_frees(allocator_type: str) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, CHAIN + 2, CHAIN + 1, 4)
    table = BlockTable(4, alloc)
    with low_recursion_limit():
        table.allocate(list(range(4 * CHAIN - 1)))
        fork = table.fork()
        assert fork.physical_block_ids == table.physical_block_ids
        fork.append_token_ids([7, 8])  # copy on write of the tail, then one new block
        assert alloc.get_num_free_blocks(Device.GPU) == 0
        swapped = alloc.swap(fork.blocks, Device.GPU, Device.CPU)
        assert len(swapped) == CHAIN + 1
        assert fork._get_all_token_ids()[-3:] == [4 * CHAIN - 2, 7, 8]
        table.free()
        fork.free()
        assert alloc.get_num_free_blocks(Device.GPU) == CHAIN + 2
        assert alloc.get_num_free_blocks(Device.CPU) == CHAIN + 1
