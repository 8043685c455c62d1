"""NaiveBlock and NaiveBlockAllocator: upstream-pinned behaviour and our checks."""

from __future__ import annotations

import pytest

from prefixcache import (
    BlockFullError,
    DoubleFreeError,
    ForkError,
    InvalidArgumentError,
    InvalidBlockError,
    NaiveBlock,
    NaiveBlockAllocator,
    NoFreeBlocksError,
    SwapError,
    UnknownBlockIdError,
)
from prefixcache.interfaces import BlockAllocator

from ._state import snapshot


def make(num_blocks: int = 4, block_size: int = 4) -> NaiveBlockAllocator:
    return NaiveBlockAllocator(
        create_block=NaiveBlock, num_blocks=num_blocks, block_size=block_size
    )


def alloc_lambda(kind: str, alloc: NaiveBlockAllocator, block_size: int):  # type: ignore[no-untyped-def]
    if kind == "immutable":
        return lambda: alloc.allocate_immutable_block(None, list(range(block_size)))
    return lambda: alloc.allocate_mutable_block(None)


@pytest.mark.parametrize("kind", ["immutable", "mutable"])
@pytest.mark.parametrize("num_blocks", [1, 1024])
@pytest.mark.parametrize("block_size", [1, 16])
def test_allocations_run_out_after_num_blocks(kind: str, num_blocks: int, block_size: int) -> None:
    alloc = make(num_blocks, block_size)
    allocate = alloc_lambda(kind, alloc, block_size)
    blocks = [allocate() for _ in range(num_blocks)]
    assert [b.block_id for b in blocks] == list(range(num_blocks))  # ascending from the left
    with pytest.raises(BlockAllocator.NoFreeBlocksError):
        allocate()


@pytest.mark.parametrize("kind", ["immutable", "mutable"])
@pytest.mark.parametrize("num_blocks", [1, 1024])
@pytest.mark.parametrize("block_size", [1, 16])
def test_a_freed_id_is_handed_out_next(kind: str, num_blocks: int, block_size: int) -> None:
    alloc = make(num_blocks, block_size)
    allocate = alloc_lambda(kind, alloc, block_size)
    blocks = [allocate() for _ in range(num_blocks)]
    block = blocks.pop()
    for _ in range(100):
        block_id = block.block_id
        alloc.free(block)
        assert block.block_id is None
        block = allocate()
        assert block.block_id == block_id
        with pytest.raises(NoFreeBlocksError):
            allocate()


@pytest.mark.parametrize("kind", ["immutable", "mutable"])
def test_free_count_tracks_frees(kind: str) -> None:
    alloc = make(1024, 16)
    allocate = alloc_lambda(kind, alloc, 16)
    assert alloc.get_num_free_blocks() == 1024
    blocks = [allocate() for _ in range(1024)]
    for i, block in enumerate(blocks):
        assert alloc.get_num_free_blocks() == i
        alloc.free(block)
    assert alloc.get_num_free_blocks() == 1024


def test_blocks_touched_counts() -> None:
    alloc = make(16, 8)
    chain = alloc.allocate_immutable_blocks(None, [list(range(8))] * 3)
    assert alloc.get_num_blocks_touched(chain) == 3
    assert alloc.get_num_full_blocks_touched(chain) == 3
    tail = alloc.allocate_mutable_block(chain[-1])
    tail.append_token_ids([0])
    blocks = [*chain, tail]
    assert [alloc.get_num_blocks_touched(blocks, n) for n in (1, 7, 8)] == [4, 4, 5]
    assert alloc.get_num_blocks_touched(blocks, 0) == 4
    assert alloc.get_num_full_blocks_touched(blocks) == 3
    tail.append_token_ids([0] * 7)
    assert alloc.get_num_full_blocks_touched(blocks) == 4
    assert alloc.get_num_full_blocks_touched([*blocks, tail]) == 4  # same object once
    forked = alloc.fork(chain[-1])
    assert alloc.get_num_blocks_touched(chain + forked) == 3  # shared ids count once
    with pytest.raises(InvalidArgumentError):
        alloc.get_num_blocks_touched(blocks, -1)


def test_naive_block_properties() -> None:
    alloc = make()
    tokens = [1, 2]
    block = NaiveBlock(None, tokens, 4, alloc)
    tokens.append(3)
    assert block.token_ids == [1, 2]  # copied
    assert block.num_empty_slots == 2 and not block.is_full and block.block_size == 4
    assert block.content_hash is None and block.extra_hash is None and block.prev_block is None
    for name in ("computed", "last_accessed", "num_tokens_total"):
        with pytest.raises(NotImplementedError):
            getattr(block, name)
    with pytest.raises(NotImplementedError):
        block.computed = True
    with pytest.raises(NotImplementedError):
        block.last_accessed = 1.0
    block.append_token_ids([3, 4])  # no id: no copy-on-write
    assert block.is_full and block.token_ids == [1, 2, 3, 4]
    with pytest.raises(BlockFullError):
        block.append_token_ids([5])
    with pytest.raises(BlockFullError):
        NaiveBlock(None, [1, 2, 3, 4, 5], 4, alloc)
    with pytest.raises(InvalidArgumentError):
        NaiveBlock(None, [], 0, alloc)
    with pytest.raises(InvalidArgumentError):
        NaiveBlock(None, ["a"], 4, alloc)  # type: ignore[list-item]


def test_copy_on_write_happens_before_tokens_and_even_for_empty_appends() -> None:
    alloc = make(4, 4)
    block = alloc.allocate_mutable_block(None)
    block.append_token_ids([1])
    fork = alloc.fork(block)[0]
    block.append_token_ids([])  # shared: an empty append still copies
    assert block.block_id == 1 and fork.block_id == 0
    assert alloc.clear_copy_on_writes() == [(0, 1)]
    assert alloc.clear_copy_on_writes() == []
    block.append_token_ids([2])  # now unshared: no copy
    assert block.block_id == 1 and block.token_ids == [1, 2] and fork.token_ids == [1]
    assert alloc.get_num_free_blocks() == 2


def test_copy_on_write_with_no_free_block_changes_nothing() -> None:
    alloc = make(1, 4)
    block = alloc.allocate_mutable_block(None)
    block.append_token_ids([1])
    fork = alloc.fork(block)[0]
    before = snapshot(alloc, [block, fork])
    with pytest.raises(NoFreeBlocksError):
        block.append_token_ids([2])
    assert snapshot(alloc, [block, fork]) == before


def test_allocate_immutable_blocks_is_all_or_nothing() -> None:
    alloc = make(3, 2)
    before = snapshot(alloc)
    with pytest.raises(NoFreeBlocksError):
        alloc.allocate_immutable_blocks(None, [[1, 2]] * 4)
    with pytest.raises(BlockFullError):
        alloc.allocate_immutable_blocks(None, [[1, 2], [1, 2, 3]])
    assert snapshot(alloc) == before
    blocks = alloc.allocate_immutable_blocks(None, [[1, 2]] * 3)
    assert [b.block_id for b in blocks] == [0, 1, 2]
    assert [b.prev_block for b in blocks] == [None, blocks[0], blocks[1]]
    assert alloc.allocate_immutable_blocks(None, []) == []


def test_fork_shares_ids_and_copies_tokens() -> None:
    alloc = make(8, 2)
    chain = alloc.allocate_immutable_blocks(None, [[1, 2], [3, 4], [5]])
    forked = alloc.fork(chain[-1])
    assert [b.block_id for b in forked] == [0, 1, 2]
    assert [b.token_ids for b in forked] == [[1, 2], [3, 4], [5]]
    assert forked[1].token_ids is not chain[1].token_ids
    assert forked[2].prev_block is forked[1]
    assert alloc.get_num_free_blocks() == 5
    assert alloc.refcounter.get(1) == 2
    for block in chain:
        alloc.free(block)
    assert alloc.get_num_free_blocks() == 5
    for block in forked:
        alloc.free(block)
    assert alloc.get_num_free_blocks() == 8


def test_misuse_raises_typed_errors_and_changes_nothing() -> None:
    alloc = make(4, 4)
    other = make(4, 4)
    block = alloc.allocate_mutable_block(None)
    freed = alloc.allocate_mutable_block(block)
    alloc.free(freed, keep_block_object=True)
    foreign = other.allocate_mutable_block(None)
    never = NaiveBlock(None, [], 4, alloc)
    before = snapshot(alloc, [block, freed])
    cases = [
        (DoubleFreeError, lambda: alloc.free(freed)),
        (InvalidBlockError, lambda: alloc.free(foreign)),
        (InvalidBlockError, lambda: alloc.free(never)),
        (ForkError, lambda: alloc.fork(freed)),
        (InvalidBlockError, lambda: alloc.fork(foreign)),
        (InvalidArgumentError, lambda: alloc.allocate_mutable_block(None, device=1)),  # type: ignore[arg-type]
        (InvalidArgumentError, lambda: alloc.allocate_mutable_block(None, extra_hash="x")),  # type: ignore[arg-type]
        (BlockFullError, lambda: alloc.allocate_immutable_block(None, [1] * 5)),
        (InvalidArgumentError, lambda: alloc.get_num_free_blocks(device=2)),  # type: ignore[arg-type]
        (UnknownBlockIdError, lambda: alloc.get_physical_block_id(99)),
        (ValueError, lambda: alloc.get_physical_block_id(99)),
        (DoubleFreeError, lambda: alloc.free_block_id(3)),
        (UnknownBlockIdError, lambda: alloc.free_block_id(99)),
        (InvalidBlockError, lambda: alloc.cow_block_if_not_appendable(foreign)),
        (InvalidArgumentError, lambda: alloc.swap_out([block, block])),
        (InvalidBlockError, lambda: alloc.swap_out([block, foreign])),
        (SwapError, lambda: alloc.swap_in([block])),
        (NotImplementedError, lambda: alloc.promote_to_immutable_block(block)),
    ]
    for error, op in cases:
        with pytest.raises(error):
            op()
        assert snapshot(alloc, [block, freed]) == before


def test_stale_handle_is_rejected() -> None:
    alloc = make(2, 4)
    block = alloc.allocate_mutable_block(None)
    alias = alloc.fork(block)[0]
    alloc.free(block)
    alloc.free(alias)
    alias.block_id = 0  # a handle pretending to hold a free id
    with pytest.raises(InvalidBlockError):
        alloc.free(alias)


@pytest.mark.parametrize(
    ("num_blocks", "block_size", "block_ids"),
    [
        (-1, 4, None),
        (2, 0, None),
        (True, 4, None),
        (2, 4, [0, 0]),
        (2, 4, [0]),
        (1, 4, ["a"]),
        (1, 4, "a"),
    ],
)
def test_constructor_rejects_bad_arguments(
    num_blocks: object, block_size: object, block_ids: object
) -> None:
    with pytest.raises(InvalidArgumentError):
        NaiveBlockAllocator(NaiveBlock, num_blocks, block_size, block_ids)  # type: ignore[arg-type]


def test_ids_counts_and_physical_ids() -> None:
    alloc = NaiveBlockAllocator(NaiveBlock, 3, 4, block_ids=iter([12, 10, 11]))
    assert alloc.all_block_ids == frozenset({10, 11, 12})
    assert alloc.all_block_ids is alloc.all_block_ids
    assert [alloc.get_physical_block_id(i) for i in (10, 11, 12)] == [0, 1, 2]
    assert alloc.get_num_total_blocks() == 3
    assert list(alloc._free_block_indices) == [12, 10, 11]  # given order kept
    assert alloc.allocate_mutable_block(None).block_id == 12


def test_prefix_cache_hooks_are_no_ops() -> None:
    alloc = make()
    alloc.mark_blocks_as_accessed([0], 1.0)
    alloc.mark_blocks_as_computed([0])
    assert alloc.get_computed_block_ids([], [0, 1], True) == []
    assert alloc.get_common_computed_block_ids([[0], [0]]) == []
    assert alloc.get_prefix_cache_hit_rate() == -1
    assert alloc.reset_prefix_cache() is True
    assert alloc.find_cached_blocks_prefix([1, 2]) == []
    assert alloc.get_num_free_blocks_needed(None, [[1], [2]]) == 2
    assert alloc.get_num_free_blocks_needed_for_swap_in([]) == 0


def test_swap_out_and_in() -> None:
    src = make(4, 2)
    dst = make(4, 2)
    blocks = src.allocate_immutable_blocks(None, [[1, 2], [3, 4]])
    tail = src.allocate_mutable_block(blocks[-1])
    tail.append_token_ids([5])
    blocks.append(tail)
    src.swap_out(blocks)
    assert src.get_num_free_blocks() == 4
    assert all(b.block_id is None for b in blocks)
    dst.swap_in(blocks)
    assert [b.block_id for b in blocks] == [0, 1, 2]
    assert [b.token_ids for b in blocks] == [[1, 2], [3, 4], [5]]
    tail.append_token_ids([6])  # now routed to dst, which holds it
    dst.free(tail)
    with pytest.raises(InvalidBlockError):
        src.free(blocks[0])
    small = make(1, 2)
    again = blocks[:2]
    dst.swap_out(again)
    before = snapshot(small, again)
    with pytest.raises(NoFreeBlocksError):
        small.swap_in(again)
    with pytest.raises(BlockFullError):
        make(2, 1).swap_in(again)
    assert snapshot(small, again) == before


def test_physical_ids_of_a_scattered_id_set() -> None:
    alloc = NaiveBlockAllocator(NaiveBlock, 3, 4, block_ids=[9, 1, 5])
    assert [alloc.get_physical_block_id(i) for i in (1, 5, 9)] == [0, 1, 2]
    for bad in (2, 10, 1.0, True, "1"):
        with pytest.raises(UnknownBlockIdError):
            alloc.get_physical_block_id(bad)  # type: ignore[arg-type]
    contiguous = NaiveBlockAllocator(NaiveBlock, 2, 4, block_ids=[7, 8])
    for bad in (6, 9, 7.0, True):
        with pytest.raises(ValueError):
            contiguous.get_physical_block_id(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        NaiveBlockAllocator(NaiveBlock, 1, 4, block_ids=[-1])
