"""PrefixCachingBlock on its own: lazy chained hashing, sentinels, appends."""

from __future__ import annotations

import random
from unittest.mock import MagicMock

import pytest

from prefixcache import (
    BlockFullError,
    ImmutableBlockError,
    InvalidArgumentError,
    InvalidBlockError,
    NaiveBlock,
    NaiveBlockAllocator,
    PrefixCachingBlock,
    PrefixCachingBlockAllocator,
    hash_block_tokens,
)


def mock_allocator() -> MagicMock:
    return MagicMock(spec=PrefixCachingBlockAllocator)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("block_size", [1, 16])
@pytest.mark.parametrize("full", [True, False])
def test_first_block_hash(seed: int, block_size: int, full: bool) -> None:
    rng = random.Random(seed)
    tokens = list(range(block_size if full else rng.randint(0, block_size - 1)))
    block = PrefixCachingBlock(None, tokens, block_size, mock_allocator())
    expected = PrefixCachingBlock.hash_block_tokens(True, None, tokens) if full else None
    assert block.content_hash == expected


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("block_size", [1, 16])
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("prev_hash_kind", ["hash", "none", "sentinel"])
def test_nth_block_hash(seed: int, block_size: int, full: bool, prev_hash_kind: str) -> None:
    rng = random.Random(seed)
    prev = MagicMock(spec=PrefixCachingBlock)
    prev_hash = rng.randint(0, 1000)
    prev.content_hash = {"hash": prev_hash, "none": None, "sentinel": hash("None")}[prev_hash_kind]
    tokens = list(range(block_size if full else rng.randint(0, block_size - 1)))
    block = PrefixCachingBlock(prev, tokens, block_size, mock_allocator())
    if full and prev_hash_kind == "hash":
        assert block.content_hash == PrefixCachingBlock.hash_block_tokens(False, prev_hash, tokens)
    else:
        assert block.content_hash is None


def build_chain(block_size: int, tokens: list[int], trailing: int) -> list[PrefixCachingBlock]:
    allocator = mock_allocator()
    num_blocks = -(-len(tokens) // block_size) + trailing
    blocks: list[PrefixCachingBlock] = []
    prev = None
    for i in range(num_blocks):
        prev = PrefixCachingBlock(prev, [], block_size, allocator)
        chunk = tokens[i * block_size : (i + 1) * block_size]
        if chunk:
            prev.append_token_ids(chunk)
        blocks.append(prev)
    return blocks


@pytest.mark.parametrize("block_size", [1, 2, 16])
@pytest.mark.parametrize("num_tokens", [0, 1, 2, 40])
@pytest.mark.parametrize("trailing", [0, 1, 10])
def test_equal_chains_hash_equally(block_size: int, num_tokens: int, trailing: int) -> None:
    rng = random.Random(0)
    tokens = [rng.randint(0, 50_000) for _ in range(num_tokens)]
    first, second = (
        build_chain(block_size, tokens, trailing),
        build_chain(block_size, tokens, trailing),
    )
    assert len(first) == len(second)
    assert [b.content_hash for b in first] == [b.content_hash for b in second]
    if not first:
        assert num_tokens == 0 and trailing == 0
    full = [b for b in first if b.is_full]
    assert all(b.content_hash is not None for b in full)
    assert all(b.content_hash is None for b in first if not b.is_full)


def test_chain_hash_matches_the_hash_function_and_counts_tokens() -> None:
    allocator = mock_allocator()
    a = PrefixCachingBlock(None, [1, 2], 2, allocator, extra_hash=7)
    b = PrefixCachingBlock(a, [3, 4], 2, allocator, extra_hash=7)
    c = PrefixCachingBlock(b, [5], 2, allocator, extra_hash=7)
    ha = hash_block_tokens(True, None, [1, 2], 7)
    assert b.content_hash == hash_block_tokens(False, ha, [3, 4], 7)
    assert a.content_hash == ha  # memoised on the way
    assert (a.num_tokens_total, b.num_tokens_total, c.num_tokens_total) == (2, 4, 5)
    assert c.content_hash is None and c.extra_hash == 7


def test_same_tokens_after_different_prefixes_hash_differently() -> None:
    allocator = mock_allocator()
    left = PrefixCachingBlock(PrefixCachingBlock(None, [1, 2], 2, allocator), [9, 9], 2, allocator)
    right = PrefixCachingBlock(PrefixCachingBlock(None, [3, 4], 2, allocator), [9, 9], 2, allocator)
    assert left.content_hash != right.content_hash


def test_an_unfilled_predecessor_means_no_hash_yet() -> None:
    allocator = mock_allocator()
    first = PrefixCachingBlock(None, [1], 2, allocator)
    second = PrefixCachingBlock(first, [3, 4], 2, allocator)
    assert second.content_hash is None
    first.append_token_ids([2])
    assert second.content_hash == hash_block_tokens(False, first.content_hash, [3, 4])


def test_append_promotes_through_the_allocator() -> None:
    allocator = mock_allocator()
    allocator.promote_to_immutable_block.return_value = 42
    block = PrefixCachingBlock(None, [1], 2, allocator)
    block.append_token_ids([])
    allocator.promote_to_immutable_block.assert_not_called()
    block.append_token_ids([2])
    assert block.block_id == 42
    allocator.promote_to_immutable_block.assert_called_once_with(block)
    with pytest.raises(ImmutableBlockError):
        block.append_token_ids([3])
    with pytest.raises(ImmutableBlockError):
        block.append_token_ids([])


def test_append_checks() -> None:
    allocator = mock_allocator()
    block = PrefixCachingBlock(None, [1], 4, allocator)
    with pytest.raises(BlockFullError):
        block.append_token_ids([2, 3, 4, 5])
    with pytest.raises(InvalidArgumentError):
        block.append_token_ids(["x"])  # type: ignore[list-item]
    assert block.token_ids == [1]
    block.computed = True
    with pytest.raises(ImmutableBlockError):
        block.append_token_ids([2])
    assert block.computed is True


def test_object_fields() -> None:
    block = PrefixCachingBlock(None, [1], 4, mock_allocator(), block_id=3, computed=True)
    assert block.block_id == 3 and block.computed and block.block_size == 4
    assert block.last_accessed == -1
    block.last_accessed = 5.0
    block.block_id = None
    assert block.last_accessed == 5.0 and block.block_id is None
    assert block.num_empty_slots == 3 and not block.is_full and block.prev_block is None


def test_constructor_checks() -> None:
    naive = NaiveBlockAllocator(NaiveBlock, 1, 4)
    with pytest.raises(InvalidArgumentError):
        PrefixCachingBlock(None, [], 4, naive)
    with pytest.raises(InvalidArgumentError):
        PrefixCachingBlock(NaiveBlock(None, [], 4, naive), [], 4, mock_allocator())
    with pytest.raises(InvalidArgumentError):
        PrefixCachingBlock(None, [], 4, mock_allocator(), extra_hash=1.5)  # type: ignore[arg-type]
    with pytest.raises(BlockFullError):
        PrefixCachingBlock(None, [1, 2, 3], 2, mock_allocator())


def test_a_real_allocators_block_without_id_cannot_be_filled() -> None:
    allocator = PrefixCachingBlockAllocator(2, 2)
    block = PrefixCachingBlock(None, [], 2, allocator)
    block.append_token_ids([1])
    with pytest.raises(InvalidBlockError):
        block.append_token_ids([2])
    assert block.token_ids == [1] and allocator.get_num_free_blocks() == 2


def test_blocks_of_a_real_allocator_hash_with_its_function() -> None:
    calls: list[tuple[object, ...]] = []

    def weak(first: bool, prev: int | None, tokens: object, extra: int | None) -> int:
        calls.append((first, prev, tuple(tokens), extra))  # type: ignore[arg-type]
        return 7

    allocator = PrefixCachingBlockAllocator(4, 2, hash_function=weak)
    block = PrefixCachingBlock(None, [1, 2], 2, allocator, extra_hash=3)
    assert block.content_hash == 7
    assert calls == [(True, None, (1, 2), 3)]
    assert PrefixCachingBlock.hash_block_tokens(True, None, [1, 2], 3) != 7
    assert allocator.hash_function is weak
