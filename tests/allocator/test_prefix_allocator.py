"""PrefixCachingBlockAllocator: the behaviour upstream's tests pin, and ours."""

from __future__ import annotations

import random

import pytest

from prefixcache import (
    BlockAllocator,
    NoFreeBlocksError,
    PrefixCachingBlock,
    PrefixCachingBlockAllocator,
    make_extra_hash,
)
from prefixcache.interfaces import Block


def immutable_chain(
    alloc: PrefixCachingBlockAllocator,
    block_size: int,
    tokens: list[int],
    extra_hash: int | None = None,
) -> list[Block]:
    blocks: list[Block] = []
    prev: Block | None = None
    for i in range(0, len(tokens), block_size):
        prev = alloc.allocate_immutable_block(
            prev, tokens[i : i + block_size], extra_hash=extra_hash
        )
        blocks.append(prev)
    return blocks


@pytest.mark.parametrize("num_blocks", [1, 1024])
@pytest.mark.parametrize("block_size", [1, 16])
def test_mutable_allocations_run_out(num_blocks: int, block_size: int) -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=num_blocks, block_size=block_size)
    for _ in range(num_blocks):
        alloc.allocate_mutable_block(None)
    with pytest.raises(BlockAllocator.NoFreeBlocksError):
        alloc.allocate_mutable_block(None)


@pytest.mark.parametrize("num_blocks", [1, 1024])
@pytest.mark.parametrize("block_size", [1, 16])
def test_identical_immutable_blocks_share_one_id(num_blocks: int, block_size: int) -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=num_blocks, block_size=block_size)
    blocks = [
        alloc.allocate_immutable_block(None, list(range(block_size))) for _ in range(num_blocks + 1)
    ]
    assert {b.block_id for b in blocks} == {0}
    assert alloc.get_num_free_blocks() == num_blocks - 1
    assert alloc._refcounter.get(0) == num_blocks + 1


@pytest.mark.parametrize("num_blocks", [1, 1024])
@pytest.mark.parametrize("block_size", [1, 16])
def test_distinct_chain_fills_the_pool_and_a_copy_reuses_it(
    num_blocks: int, block_size: int
) -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=num_blocks, block_size=block_size)
    tokens = list(range(num_blocks * block_size))
    chain = immutable_chain(alloc, block_size, tokens)
    with pytest.raises(NoFreeBlocksError):
        alloc.allocate_immutable_block(chain[-1], list(range(block_size)))
    with pytest.raises(NoFreeBlocksError):
        alloc.allocate_mutable_block(chain[-1])
    second = immutable_chain(alloc, block_size, tokens)
    assert [b.block_id for b in second] == [b.block_id for b in chain]


@pytest.mark.parametrize("num_blocks", [1, 1024])
@pytest.mark.parametrize("block_size", [1, 16])
def test_free_then_allocate_reuses_the_id(num_blocks: int, block_size: int) -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=num_blocks, block_size=block_size)
    chain = immutable_chain(alloc, block_size, list(range(num_blocks * block_size)))
    with pytest.raises(NoFreeBlocksError):
        alloc.allocate_mutable_block(None)
    block = chain[-1]
    for i in range(100):
        block_id = block.block_id
        alloc.free(block)
        assert block.block_id is None, i
        block = alloc.allocate_mutable_block(None)
        assert block.block_id == block_id, i
        with pytest.raises(NoFreeBlocksError):
            alloc.allocate_mutable_block(None)


@pytest.mark.parametrize("seed", range(4))
def test_each_free_returns_exactly_one_block(seed: int) -> None:
    rng = random.Random(seed)
    alloc = PrefixCachingBlockAllocator(num_blocks=1024, block_size=16)
    k = rng.randint(1, 1023)
    chain = immutable_chain(alloc, 16, list(range(k * 16)))
    for i, block in enumerate(chain):
        assert alloc.get_num_free_blocks() == 1024 - k + i
        alloc.free(block)
    assert alloc.get_num_free_blocks() == 1024


@pytest.mark.parametrize("seed", range(4))
def test_shared_chains_free_only_with_the_last_holder(seed: int) -> None:
    rng = random.Random(seed)
    alloc = PrefixCachingBlockAllocator(num_blocks=1024, block_size=16)
    k = rng.randint(1, 1023)
    tokens = list(range(k * 16))
    first, second = immutable_chain(alloc, 16, tokens), immutable_chain(alloc, 16, tokens)
    for block in first:
        assert alloc.get_num_free_blocks() == 1024 - k
        alloc.free(block)
    for i, block in enumerate(second):
        assert alloc.get_num_free_blocks() == 1024 - k + i
        alloc.free(block)


def test_blocks_touched_on_a_destination_cache() -> None:
    src = PrefixCachingBlockAllocator(num_blocks=4, block_size=8)
    dst = PrefixCachingBlockAllocator(num_blocks=4, block_size=8)
    tokens = list(range(3 * 8))
    cached = immutable_chain(dst, 8, tokens)
    to_swap = immutable_chain(src, 8, tokens)
    assert dst.get_num_blocks_touched(to_swap) == 0
    assert dst.get_num_full_blocks_touched(to_swap) == 0
    dst.free(cached[0])
    assert dst.get_num_blocks_touched(to_swap) == 1
    assert dst.get_num_full_blocks_touched(to_swap) == 1
    tail = src.allocate_mutable_block(to_swap[-1])
    tail.append_token_ids([0])
    to_swap.append(tail)
    assert [dst.get_num_blocks_touched(to_swap, n) for n in (1, 7, 8)] == [2, 2, 3]
    assert dst.get_num_blocks_touched(to_swap) == 2
    assert dst.get_num_full_blocks_touched(to_swap) == 1
    tail.append_token_ids([0] * 7)
    assert dst.get_num_full_blocks_touched(to_swap) == 2
    assert dst.get_num_blocks_touched(to_swap) == 2


@pytest.mark.parametrize("seed", range(6))
def test_common_computed_prefix_length(seed: int) -> None:
    rng = random.Random(seed)
    alloc = PrefixCachingBlockAllocator(num_blocks=2048, block_size=16)
    k = rng.randint(1, 1023)
    tokens = list(range(k * 16))
    first = immutable_chain(alloc, 16, tokens)
    zero_point = rng.randint(1, len(tokens) - 1)
    tokens[zero_point:] = [-1] * (len(tokens) - zero_point)
    second = immutable_chain(alloc, 16, tokens)
    common = alloc.get_common_computed_block_ids(
        [[b.block_id for b in first], [b.block_id for b in second]]  # type: ignore[misc]
    )
    assert len(common) == zero_point // 16


def test_common_computed_quirks() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=1, block_size=1)
    only = [1, 2]
    assert alloc.get_common_computed_block_ids([only]) is only
    assert alloc.get_common_computed_block_ids([[1, 2, 3], [], [1, 2, 4], [1, 2]]) == [1, 2]
    assert alloc.get_common_computed_block_ids([[], []]) == ""
    assert alloc.get_common_computed_block_ids([]) == ""
    assert alloc.get_common_computed_block_ids([[5], [6]]) == []


@pytest.mark.parametrize("seed", range(3))
def test_promotion_onto_a_cached_duplicate(seed: int) -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=3, block_size=16)
    tokens = list(range(16))
    block = alloc.allocate_immutable_block(None, tokens)
    assert alloc._refcounter.get(block.block_id) == 1  # type: ignore[arg-type]
    mutable = alloc.allocate_mutable_block(None)
    own_id = mutable.block_id
    for token in tokens:
        mutable.append_token_ids([token])
    assert mutable.block_id == block.block_id == 0
    assert own_id in alloc._hashless_allocator._free_block_indices
    assert alloc._refcounter.get(0) == 2
    assert mutable.computed and alloc.clear_copy_on_writes() == []


def test_promotion_revives_an_evictable_duplicate() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=2, block_size=2)
    cached = alloc.allocate_immutable_block(None, [1, 2])
    alloc.mark_blocks_as_computed([])  # its KV was written (else it revives uncomputed)
    alloc.free(cached)
    assert 0 in alloc.evictor and alloc.get_num_free_blocks() == 2
    block = alloc.allocate_mutable_block(None)  # takes id 1 from the deque
    block.append_token_ids([1, 2])
    assert block.block_id == 0 and 0 not in alloc.evictor
    assert alloc._block_tracker[0].active and alloc._block_tracker[0].computed
    assert alloc.get_num_free_blocks() == 1  # id 1 is back: neutral overall


@pytest.mark.parametrize("seed", range(3))
def test_mixed_eviction_and_allocation(seed: int) -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=3, block_size=16)
    tokens = list(range(3 * 16))
    assert list(alloc._hashless_allocator._free_block_indices) == [0, 1, 2]
    assert len(alloc._block_tracker) == 3
    assert not any(alloc._block_tracker[i].active for i in range(3))
    assert not alloc._cached_blocks and not alloc.evictor.free_table  # type: ignore[attr-defined]
    assert alloc._refcounter._refcounts == {0: 0, 1: 0, 2: 0}

    blocks = [alloc.allocate_immutable_block(None, tokens[16 * i : 16 * (i + 1)]) for i in range(3)]
    assert len(alloc._hashless_allocator._free_block_indices) == 0
    assert all(alloc._block_tracker[i].active for i in range(3))
    assert len(alloc._cached_blocks) == 3
    assert alloc._refcounter._refcounts == {0: 1, 1: 1, 2: 1}

    for block in blocks:
        alloc.free(block)
    assert not any(alloc._block_tracker[i].active for i in range(3))
    assert list(alloc._cached_blocks.values()) == [0, 1, 2]
    assert list(alloc.evictor.free_table) == [0, 1, 2]  # type: ignore[attr-defined]
    assert alloc._refcounter._refcounts == {0: 0, 1: 0, 2: 0}

    mutable = alloc.allocate_mutable_block(None)
    assert mutable.block_id == 0 and mutable.content_hash is None
    assert alloc._block_tracker[0].active and alloc._refcounter.get(0) == 1
    assert 0 not in alloc._cached_blocks.values() and 0 not in alloc.evictor
    alloc.free(mutable)
    assert not alloc._block_tracker[0].active
    assert 0 in alloc._hashless_allocator._free_block_indices

    block = alloc.allocate_immutable_block(None, tokens[:16])
    assert block.block_id == 0
    assert len(alloc._hashless_allocator._free_block_indices) == 0
    assert 0 in alloc._cached_blocks.values() and alloc._refcounter.get(0) == 1

    mutable = alloc.allocate_mutable_block(None)
    assert mutable.block_id == 1  # from the evictor: oldest-added among equal candidates
    assert mutable.block_id not in alloc.evictor.free_table  # type: ignore[attr-defined]
    assert alloc._refcounter.get(1) == 1


def test_eviction_prefers_oldest_then_deepest() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=1024, block_size=16)
    tokens = list(range(1025 * 16))
    first = immutable_chain(alloc, 16, tokens[:32])
    alloc.mark_blocks_as_accessed([b.block_id for b in first], 1)  # type: ignore[misc]
    second = immutable_chain(alloc, 16, tokens[32:-16])
    assert alloc.get_num_free_blocks() == 0
    last_of_first = first[-1].block_id
    for block in first:
        alloc.free(block)
    alloc.mark_blocks_as_accessed([b.block_id for b in second], 2)  # type: ignore[misc]
    for block in second:
        alloc.free(block)
    new = alloc.allocate_immutable_block(None, tokens[-16:])
    assert new.block_id == last_of_first


def test_hit_rate() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=4, block_size=16)
    assert alloc.get_prefix_cache_hit_rate() == 0.0
    tokens = list(range(16))
    alloc.allocate_immutable_block(None, tokens)
    assert alloc.get_prefix_cache_hit_rate() == 0.0
    alloc.allocate_immutable_block(None, tokens)
    assert alloc.get_prefix_cache_hit_rate() == 0.5
    for _ in range(2, 1005):
        alloc.allocate_immutable_block(None, tokens)
    assert alloc.get_prefix_cache_hit_rate() > 0.99
    assert alloc.metric_data.num_queries == 1005 and alloc.metric_data.num_hits == 1004


def test_touched_blocks_become_computed_only_when_marked() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=8, block_size=16)
    tokens = list(range(64))
    for _ in range(3):
        blocks = immutable_chain(alloc, 16, tokens)
        ids = [b.block_id for b in blocks]
        assert alloc.get_computed_block_ids([], ids, skip_last_block_id=False) == []  # type: ignore[arg-type]
        assert alloc.find_cached_blocks_prefix([b.content_hash for b in blocks]) == []  # type: ignore[misc]
    alloc.mark_blocks_as_computed([])
    assert alloc.get_computed_block_ids([], ids, skip_last_block_id=False) == ids  # type: ignore[arg-type]
    hashes = [b.content_hash for b in blocks]
    assert alloc.find_cached_blocks_prefix(hashes) == hashes  # type: ignore[arg-type]
    assert alloc._touched_blocks == set()


def test_get_computed_block_ids_appends_to_the_given_list() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=8, block_size=2)
    blocks = immutable_chain(alloc, 2, [1, 2, 3, 4, 5, 6])
    alloc.mark_blocks_as_computed([])
    gap = alloc.allocate_mutable_block(blocks[-1])
    ids = [b.block_id for b in blocks] + [gap.block_id, blocks[0].block_id]
    prev = [ids[0]]
    result = alloc.get_computed_block_ids(prev, ids)  # type: ignore[arg-type]
    assert result is prev
    assert result == [ids[0], ids[1], ids[2]]  # gap skipped, last id skipped
    # the answer stops at the gap: computed ids are a prefix (upstream: [0, 1, 2, 0])
    assert alloc.get_computed_block_ids([], ids, skip_last_block_id=False) == [0, 1, 2]  # type: ignore[arg-type]
    alloc.free(blocks[2])
    assert alloc.block_is_computed(blocks[0].block_id)  # type: ignore[arg-type]
    assert alloc.block_is_computed(2) and not alloc.block_is_computed(gap.block_id)  # type: ignore[arg-type]
    assert not alloc.block_is_computed(7)


def test_find_cached_blocks_prefix_after_eviction() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=8, block_size=4)
    tokens = list(range(12 * 4))
    seq1 = immutable_chain(alloc, 4, tokens[:32])
    hashes1 = [b.content_hash for b in seq1]
    alloc.mark_blocks_as_computed([])
    assert len(alloc.find_cached_blocks_prefix(hashes1)) == 8  # type: ignore[arg-type]
    for block in seq1:
        alloc.free(block)
    assert len(alloc.find_cached_blocks_prefix(hashes1)) == 8  # type: ignore[arg-type]
    seq2 = immutable_chain(alloc, 4, tokens[32:])
    alloc.mark_blocks_as_computed([])
    assert len(alloc.find_cached_blocks_prefix([b.content_hash for b in seq2])) == 4  # type: ignore[misc]
    assert len(alloc.find_cached_blocks_prefix(hashes1)) == 4  # type: ignore[arg-type]
    assert alloc.find_cached_blocks_prefix([]) == []


def test_find_cached_blocks_prefix_is_exact_when_not_prefix_closed() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=4, block_size=1)
    chain = immutable_chain(alloc, 1, [1, 2, 3])
    alloc.mark_blocks_as_computed([])
    hashes = [b.content_hash for b in chain]
    alloc.free(chain[2])
    alloc.free(chain[1])
    alloc.mark_blocks_as_accessed([2], 10)  # the tail was used more recently
    alloc.allocate_mutable_block(None)  # deque id 3
    assert alloc.allocate_mutable_block(None).block_id == 1  # evicts the middle block
    assert hashes[2] in alloc._cached_blocks
    assert alloc.find_cached_blocks_prefix(hashes) == hashes[:1]  # type: ignore[arg-type]


def test_reset_prefix_cache() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=10, block_size=16)
    tokens = list(range(48))
    first, second = immutable_chain(alloc, 16, tokens), immutable_chain(alloc, 16, tokens)
    for block in first:
        alloc.free(block)
    assert not alloc.reset_prefix_cache()
    assert alloc.get_prefix_cache_hit_rate() > 0.0
    for block in second:
        alloc.free(block)
    assert alloc.evictor.num_blocks == 3
    assert alloc.reset_prefix_cache()
    assert alloc.get_prefix_cache_hit_rate() == 0.0
    assert not alloc._cached_blocks and alloc.evictor.num_blocks == 0
    assert alloc.get_num_free_blocks() == 10
    assert sorted(alloc._hashless_allocator._free_block_indices) == list(range(10))
    again = alloc.allocate_immutable_block(None, tokens[:16])
    assert not again.computed  # a miss: nothing survived the reset


def test_extra_hash_isolates_identical_tokens() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=8, block_size=4)
    tokens = list(range(8))
    plain = immutable_chain(alloc, 4, tokens)
    lora1 = immutable_chain(alloc, 4, tokens, extra_hash=make_extra_hash(lora_id=1))
    lora2 = immutable_chain(alloc, 4, tokens, extra_hash=make_extra_hash(lora_id=2))
    salted = immutable_chain(alloc, 4, tokens, extra_hash=make_extra_hash(cache_salt="s"))
    ids = [tuple(b.block_id for b in chain) for chain in (plain, lora1, lora2, salted)]
    assert len(set(ids)) == 4 and len({i for chain in ids for i in chain}) == 8
    assert alloc.metric_data.num_hits == 0
    assert [b.extra_hash for b in lora1] == [make_extra_hash(lora_id=1)] * 2
    again = immutable_chain(alloc, 4, tokens, extra_hash=make_extra_hash(lora_id=1))
    assert [b.block_id for b in again] == [b.block_id for b in lora1]
    assert alloc.metric_data.num_hits == 2


def test_same_block_after_different_prefixes_is_not_shared() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=8, block_size=2)
    a = immutable_chain(alloc, 2, [1, 2, 9, 9])
    b = immutable_chain(alloc, 2, [3, 4, 9, 9])
    assert a[1].block_id != b[1].block_id
    assert a[1].content_hash != b[1].content_hash


def test_weak_hash_function_is_honoured() -> None:
    alloc = PrefixCachingBlockAllocator(
        num_blocks=4, block_size=2, hash_function=lambda first, prev, tokens, extra: 0
    )
    a = alloc.allocate_immutable_block(None, [1, 2])
    b = alloc.allocate_immutable_block(None, [3, 4])
    assert a.block_id == b.block_id  # collision shares, as the injected hash dictates
    assert a.content_hash == b.content_hash == 0
    default = PrefixCachingBlockAllocator(num_blocks=4, block_size=2)
    c = default.allocate_immutable_block(None, [1, 2])
    d = default.allocate_immutable_block(None, [3, 4])
    assert c.block_id != d.block_id


def test_chain_whose_hashes_collide_is_counted_and_allocated_consistently() -> None:
    alloc = PrefixCachingBlockAllocator(
        num_blocks=2, block_size=1, hash_function=lambda first, prev, tokens, extra: 5
    )
    blocks = alloc.allocate_immutable_blocks(None, [[1], [2], [3]])
    assert {b.block_id for b in blocks} == {0}
    assert alloc.get_num_free_blocks() == 1


def test_mark_blocks_as_accessed_updates_trackers_and_evictor() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=4, block_size=1)
    active = alloc.allocate_immutable_block(None, [1])
    evictable = alloc.allocate_immutable_block(None, [2])
    alloc.free(evictable)
    alloc.mark_blocks_as_accessed([0, 1], 3.5)
    assert alloc._block_tracker[0].last_accessed == 3.5
    assert alloc.evictor.free_table[1].last_accessed == 3.5  # type: ignore[attr-defined]
    alloc.free(active)
    assert alloc.evictor.free_table[0].last_accessed == 3.5  # type: ignore[attr-defined]


def test_is_block_cached() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=4, block_size=2)
    block = alloc.allocate_immutable_block(None, [1, 2])
    assert alloc.is_block_cached(block)
    other = PrefixCachingBlock(None, [3, 4], 2, alloc)
    assert not alloc.is_block_cached(other)


def test_fork_keeps_counts_and_copies_hashes() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=8, block_size=2)
    chain = immutable_chain(alloc, 2, [1, 2, 3, 4])
    tail = alloc.allocate_mutable_block(chain[-1])
    tail.append_token_ids([5])
    free_before = alloc.get_num_free_blocks()
    trackers = {k: (t.active, t.computed) for k, t in alloc._block_tracker.items()}
    forked = alloc.fork(tail)
    assert alloc.get_num_free_blocks() == free_before
    assert {k: (t.active, t.computed) for k, t in alloc._block_tracker.items()} == trackers
    assert [b.block_id for b in forked] == [0, 1, 2]
    assert [b.content_hash for b in forked] == [b.content_hash for b in [*chain, tail]]
    assert [alloc._refcounter.get(i) for i in range(3)] == [2, 2, 2]
    forked[-1].append_token_ids([6])  # copy on write, then promotion of the copy
    assert forked[-1].block_id not in (0, 1, 2)
    assert alloc.clear_copy_on_writes() == [(2, 3)]
    assert alloc._cached_blocks[forked[-1].content_hash] == 3  # type: ignore[index]


def test_eviction_forgets_touched_ids() -> None:
    alloc = PrefixCachingBlockAllocator(num_blocks=1, block_size=1)
    block = alloc.allocate_immutable_block(None, [1])
    alloc.free(block)
    assert alloc._touched_blocks == set()  # released before a mark: unwritten, not touched
    assert alloc._unwritten == {0}
    reused = alloc.allocate_mutable_block(None)
    assert alloc._touched_blocks == set()
    alloc.mark_blocks_as_computed([])
    assert not alloc.block_is_computed(reused.block_id)  # type: ignore[arg-type]


def test_swap_out_and_in_between_prefix_allocators() -> None:
    gpu = PrefixCachingBlockAllocator(num_blocks=4, block_size=2, block_ids=range(4))
    cpu = PrefixCachingBlockAllocator(num_blocks=4, block_size=2, block_ids=range(4, 8))
    chain = immutable_chain(gpu, 2, [1, 2, 3, 4])
    tail = gpu.allocate_mutable_block(chain[-1])
    tail.append_token_ids([5])
    blocks = [*chain, tail]
    hashes = [b.content_hash for b in blocks]
    assert cpu.get_num_free_blocks_needed_for_swap_in(blocks) == 3
    gpu.swap_out(blocks)
    assert gpu.get_num_free_blocks() == 4 and gpu.evictor.num_blocks == 2
    cpu.swap_in(blocks)
    assert [b.block_id for b in blocks] == [4, 5, 6]
    assert [b.content_hash for b in blocks] == hashes
    assert cpu.metric_data.num_queries == 0  # a swap-in is no cache query
    cpu.swap_out(blocks)
    gpu.swap_in(blocks)
    assert [b.block_id for b in blocks[:2]] == [0, 1]  # cache hits on the evictable ids
    assert (gpu.metric_data.num_queries, gpu.metric_data.num_hits) == (2, 0)  # the admission's
    tail.append_token_ids([6])
    assert tail.block_id is not None and tail.content_hash is not None


def test_constructor_checks() -> None:
    from prefixcache import InvalidArgumentError

    for kwargs in (
        {"num_blocks": -1, "block_size": 2},
        {"num_blocks": 2, "block_size": 0},
        {"num_blocks": 2, "block_size": 2, "block_ids": [0, 0]},
        {"num_blocks": 2, "block_size": 2, "hash_function": 5},
        {"num_blocks": 2, "block_size": 2, "eviction_policy": "lru"},
    ):
        with pytest.raises(InvalidArgumentError):
            PrefixCachingBlockAllocator(**kwargs)  # type: ignore[arg-type]


def test_inexact_time_stamps_are_rejected_before_anything_changes() -> None:
    from prefixcache import InvalidArgumentError

    alloc = PrefixCachingBlockAllocator(num_blocks=2, block_size=1)
    block = alloc.allocate_immutable_block(None, [1])
    with pytest.raises(InvalidArgumentError):
        alloc.mark_blocks_as_accessed([block.block_id], 2**53 + 1)  # type: ignore[list-item]
    alloc.mark_blocks_as_accessed([block.block_id], 2**53)  # type: ignore[list-item]
    alloc.free(block)
    assert alloc.evictor.free_table[0].last_accessed == 2**53  # type: ignore[attr-defined]
