"""The lean allocation paths must be indistinguishable from the checked ones: pooled block
objects re-initialised without re-checking (``PrefixCachingBlock._reinit``), the fork fast
path for held blocks, the one-pass ``mark_blocks_as_accessed``, the hash memo that keeps
the admission count's own chunk lists, and ``BlockTable``'s single split of a prompt."""

from __future__ import annotations

import random
from typing import Any

import pytest

from prefixcache import (
    BlockTable,
    CpuGpuBlockAllocator,
    Device,
    ForkError,
    InvalidBlockError,
    PrefixCachingBlock,
    PrefixCachingBlockAllocator,
    UnknownBlockIdError,
)
from prefixcache.interfaces import Block, BlockAllocator

from ._state import snapshot

BLOCK_SIZE = 4


class _SubBlock(PrefixCachingBlock):
    """A subclass: the pool must re-initialise it through ``__init__``."""

    __slots__ = ()


class _SubBlockAllocator(PrefixCachingBlockAllocator):
    def _create_block(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        block_size: int,
        allocator: BlockAllocator,
        block_id: int | None = None,
        computed: bool = False,
        extra_hash: int | None = None,
    ) -> Block:
        return _SubBlock(prev_block, token_ids, block_size, self, block_id, computed, extra_hash)


def _observable(block: Block) -> tuple[Any, ...]:
    return (
        type(block),
        block.block_id,
        list(block.token_ids),
        block.num_tokens_total,
        block.content_hash,
        block.computed,
        block.last_accessed,
        block.extra_hash,
        block.is_full,
        block.prev_block.block_id if block.prev_block is not None else None,
    )


def _exhaust_pool(alloc: PrefixCachingBlockAllocator) -> None:
    """Create pool-capacity block objects and free them: later blocks reuse objects."""
    capacity = alloc._block_pool.pool_size
    held = []
    while len(alloc._block_pool._pool) < capacity:
        held.append(alloc.allocate_mutable_block(None))
        if alloc.get_num_free_blocks() == 0:
            for block in held:
                alloc.free(block)
            held.clear()
    for block in held:
        alloc.free(block)
    assert alloc._block_pool.take_reusable() is not None  # reuse has started
    alloc._block_pool._free_ids.appendleft(0)  # undo the probe
    alloc._block_pool._is_free[0] = 1


def _script(alloc: PrefixCachingBlockAllocator, seed: int) -> list[tuple[Any, ...]]:
    """A seeded mix of chains, hits, forks, appends and frees; observable block states."""
    rng = random.Random(seed)
    out: list[tuple[Any, ...]] = []
    chains: list[list[Block]] = []
    for step in range(120):
        choice = rng.randrange(5)
        if choice == 0 or not chains:
            count = rng.randrange(1, 4)
            chunks = [[rng.randrange(3) for _ in range(BLOCK_SIZE)] for _ in range(count)]
            extra = rng.choice([None, 5])
            if alloc.get_num_free_blocks_needed(None, chunks, extra) <= alloc.get_num_free_blocks():
                chains.append(alloc.allocate_immutable_blocks(None, chunks, extra_hash=extra))
        elif choice == 1 and alloc.get_num_free_blocks():
            chain = rng.choice(chains)
            if chain[-1].is_full:
                block = alloc.allocate_mutable_block(chain[-1], extra_hash=chain[-1].extra_hash)
                block.append_token_ids([rng.randrange(3)])
                chain.append(block)
        elif choice == 2:
            chains.append(alloc.fork(rng.choice(chains)[-1]))
        elif choice == 3:
            block = rng.choice(rng.choice(chains))
            alloc.mark_blocks_as_accessed([block.block_id], float(step))  # type: ignore[list-item]
        else:
            for block in chains.pop(rng.randrange(len(chains))):
                alloc.free(block)
        out.append(tuple(_observable(b) for chain in chains for b in chain))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_reused_objects_behave_like_fresh_ones(seed: int) -> None:
    fresh = PrefixCachingBlockAllocator(8, BLOCK_SIZE)
    fresh._block_pool._capacity = 10**9  # never reuses
    reused = PrefixCachingBlockAllocator(8, BLOCK_SIZE)
    _exhaust_pool(reused)
    before = len(reused._block_pool._pool)
    assert _script(reused, seed) == _script(fresh, seed)
    created = len(fresh._block_pool._pool)  # one object per block ever made
    assert len(reused._block_pool._pool) - before < created  # objects were reused
    for alloc in (reused, fresh):
        alloc._block_pool = None  # type: ignore[assignment]  # the one intended difference
    assert snapshot(reused)["allocator"] == snapshot(fresh)["allocator"]


def test_reused_object_is_reset_completely() -> None:
    alloc = PrefixCachingBlockAllocator(4, BLOCK_SIZE)
    _exhaust_pool(alloc)
    head = alloc.allocate_immutable_block(None, [1, 2, 3, 4], extra_hash=9)
    alloc.allocate_immutable_block(head, [5, 6, 7, 8], extra_hash=9)
    again = alloc.allocate_immutable_block(head, [5, 6, 7, 8], extra_hash=9)  # a hit
    assert again.computed and again.content_hash is not None
    again.last_accessed = 7.0
    alloc._block_pool._free_ids.clear()  # the next object freed is the next one reused
    alloc.free(again)
    block = alloc.allocate_mutable_block(None)
    assert block is again  # the same object, re-initialised
    fresh = PrefixCachingBlock(None, [], BLOCK_SIZE, alloc, block.block_id)
    assert _observable(block) == _observable(fresh)
    assert block._owner is alloc and block._cached_content_hash is None


def test_forked_token_lists_are_copies() -> None:
    alloc = PrefixCachingBlockAllocator(8, BLOCK_SIZE)
    _exhaust_pool(alloc)
    chain = alloc.allocate_immutable_blocks(None, [[1, 2, 3, 4]])
    tail = alloc.allocate_mutable_block(chain[-1])
    tail.append_token_ids([5])
    forked = alloc.fork(tail)
    assert forked[-1].token_ids is not tail.token_ids
    forked[-1].append_token_ids([6])  # copy on write; the source is untouched
    assert tail.token_ids == [5] and forked[-1].token_ids == [5, 6]
    assert forked[-1].block_id != tail.block_id


def test_subclass_objects_and_predecessors_take_the_checked_path() -> None:
    sub = _SubBlockAllocator(4, BLOCK_SIZE)
    _exhaust_pool(sub)
    block = sub.allocate_mutable_block(None)
    assert type(block) is _SubBlock and block._owner is sub
    assert sub._block_pool._pool[block.pool_id] is block  # type: ignore[attr-defined]
    free_before = sub.get_num_free_blocks()
    sub.free(block)
    assert block.block_id is None and sub.get_num_free_blocks() == free_before + 1
    # an exact pooled object chained after a subclass predecessor
    exact = PrefixCachingBlockAllocator(4, BLOCK_SIZE)
    _exhaust_pool(exact)
    prev = sub.allocate_immutable_block(None, [1, 2, 3, 4])
    after = exact.allocate_mutable_block(prev)
    assert type(after) is PrefixCachingBlock
    assert after.prev_block is prev and after.num_tokens_total == 4
    after.append_token_ids([1, 2, 3, 4])
    expected = PrefixCachingBlock.hash_block_tokens(False, prev.content_hash, [1, 2, 3, 4])
    assert after.content_hash == expected


def test_fork_fast_path_keeps_every_error() -> None:
    alloc = PrefixCachingBlockAllocator(8, BLOCK_SIZE)
    chain = alloc.allocate_immutable_blocks(None, [[1, 2, 3, 4], [5, 6, 7, 8]])
    other = PrefixCachingBlockAllocator(8, BLOCK_SIZE)
    foreign = other.allocate_immutable_block(None, [1, 2, 3, 4])
    before = snapshot(alloc)
    with pytest.raises(InvalidBlockError):
        alloc.fork(foreign)
    alloc.free(chain[0], keep_block_object=True)
    before = snapshot(alloc)
    with pytest.raises(ForkError):
        alloc.fork(chain[1])  # its predecessor was freed
    assert snapshot(alloc) == before
    lone = alloc.allocate_immutable_block(None, [9, 9, 9, 9])
    before = snapshot(alloc)
    lone.block_id = 99  # an id this allocator does not own
    with pytest.raises(UnknownBlockIdError):
        alloc.fork(lone)
    assert snapshot(alloc) == before


def test_one_pass_access_marks() -> None:
    alloc = PrefixCachingBlockAllocator(4, BLOCK_SIZE)
    active = alloc.allocate_immutable_block(None, [1, 2, 3, 4])
    cached = alloc.allocate_immutable_block(None, [5, 6, 7, 8])
    alloc.free(cached)
    cached_id = alloc._cached_blocks[cached.content_hash]  # type: ignore[index]

    class Id(int):
        pass

    alloc.mark_blocks_as_accessed([Id(active.block_id), cached_id, cached_id], 3.0)  # type: ignore[arg-type]
    assert alloc._block_tracker[active.block_id].last_accessed == 3.0  # type: ignore[index]
    assert alloc.evictor.free_table[cached_id].last_accessed == 3.0  # type: ignore[attr-defined]
    before = snapshot(alloc)
    free_id = next(iter(alloc._hashless_allocator._free_block_indices))
    bad_ids = [(True, UnknownBlockIdError), (77, UnknownBlockIdError), (free_id, InvalidBlockError)]
    for bad, error in bad_ids:
        with pytest.raises(error):
            alloc.mark_blocks_as_accessed([active.block_id, cached_id, bad], 9.0)  # type: ignore[list-item]
        assert snapshot(alloc) == before
        assert alloc._block_tracker[active.block_id].last_accessed == 3.0  # type: ignore[index]


def test_admission_memo_does_not_alias_the_callers_lists() -> None:
    alloc = PrefixCachingBlockAllocator(8, BLOCK_SIZE)
    chunks = [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert alloc.get_num_free_blocks_needed(None, chunks) == 2
    chunks[1][0] = 50  # after the count, before the allocation
    blocks = alloc.allocate_immutable_blocks(None, chunks)
    first = PrefixCachingBlock.hash_block_tokens(True, None, [1, 2, 3, 4])
    assert blocks[1].content_hash == PrefixCachingBlock.hash_block_tokens(
        False, first, [50, 6, 7, 8]
    )
    # and the memo the allocation left behind is not the blocks' own lists
    blocks[1].token_ids[1] = 60
    assert alloc.get_num_free_blocks_needed(None, [[1, 2, 3, 4], [50, 6, 7, 8]]) == 0


@pytest.mark.parametrize("length", [1, 3, 4, 5, 8, 11])
def test_table_allocate_splits_once(length: int) -> None:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 16, 4, BLOCK_SIZE)
    tokens = list(range(length))
    table = BlockTable(BLOCK_SIZE, alloc)
    table.allocate(tuple(tokens))  # type: ignore[arg-type]
    assert table._get_all_token_ids() == tokens
    assert [len(b.token_ids) for b in table.blocks] == [
        min(BLOCK_SIZE, length - i) for i in range(0, length, BLOCK_SIZE)
    ]
    assert [b.content_hash is not None for b in table.blocks] == [
        len(b.token_ids) == BLOCK_SIZE for b in table.blocks
    ]
    assert table.num_full_slots == length
    again = table._allocate_blocks_for_token_ids(None, tokens, Device.GPU)  # a second copy
    full = length // BLOCK_SIZE
    assert [b.block_id for b in again[:full]] == table.physical_block_ids[:full]  # hits
    assert [b.token_ids for b in again] == [b.token_ids for b in table.blocks]
