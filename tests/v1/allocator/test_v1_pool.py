"""Example-based tests of the bundled v1 ``BlockPool``: allocation order, refcounts, caching
(duplicates, aliases, promotion), eviction, reset, and the smaller methods."""

from __future__ import annotations

import pytest

from prefixcache.v1.core.block_pool import BlockPool
from prefixcache.v1.core.kv_cache_utils import (
    KVCacheBlock,
    get_block_hash,
    get_group_id,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
)
from prefixcache.v1.errors import CacheConflictError, DoubleFreeError, NoFreeBlocksError
from prefixcache.v1.kv_events import BlockRemoved, BlockStored

from ._support import FakeRequest, check_invariants, queue_ids, snapshot


def _req(tokens: list[int], hbs: int = 4, rid: str = "r") -> FakeRequest:
    return FakeRequest(rid, tokens, hbs)


def test_construction_reserves_the_null_block() -> None:
    pool = BlockPool(6, enable_caching=True, hash_block_size=4)
    assert pool.null_block is pool.blocks[0] and pool.null_block.is_null
    assert queue_ids(pool) == [1, 2, 3, 4, 5]
    assert pool.get_num_free_blocks() == 5
    assert pool.get_usage() == 0.0
    assert BlockPool(1, enable_caching=True, hash_block_size=4).get_usage() == 0.0
    check_invariants(pool)


def test_get_new_blocks_pops_the_head_with_one_reference() -> None:
    pool = BlockPool(6, enable_caching=True, hash_block_size=4)
    assert pool.get_new_blocks(0) == []
    got = pool.get_new_blocks(3)
    assert [b.block_id for b in got] == [1, 2, 3]
    assert all(b.ref_cnt == 1 for b in got)
    assert queue_ids(pool) == [4, 5]
    assert pool.get_usage() == pytest.approx(3 / 5)
    before = snapshot(pool)
    with pytest.raises(NoFreeBlocksError) as info:
        pool.get_new_blocks(3)
    assert isinstance(info.value, ValueError)
    assert snapshot(pool) == before
    check_invariants(pool)


def test_free_order_keyless_first_keyed_last_tail_first() -> None:
    pool = BlockPool(9, enable_caching=True, hash_block_size=4)
    req = _req(list(range(10)))  # 2 full blocks + 2 tokens
    blocks = pool.get_new_blocks(3)
    pool.cache_full_blocks(req, blocks, 0, 2, 4, 0)
    pool.free_blocks(reversed(blocks))  # engines free a request tail first
    # keyless partial block 3 at the head, then untouched 4..8, then the chain tail first
    assert queue_ids(pool) == [3, 4, 5, 6, 7, 8, 2, 1]
    check_invariants(pool)


def test_lru_across_requests_and_touch_removes_from_queue() -> None:
    pool = BlockPool(8, enable_caching=True, hash_block_size=2)
    a = _req([1, 2, 3, 4], hbs=2, rid="a")
    b = _req([5, 6, 7, 8], hbs=2, rid="b")
    blocks_a = pool.get_new_blocks(2)
    pool.cache_full_blocks(a, blocks_a, 0, 2, 2, 0)
    blocks_b = pool.get_new_blocks(2)
    pool.cache_full_blocks(b, blocks_b, 0, 2, 2, 0)
    pool.free_blocks(reversed(blocks_a))
    pool.free_blocks(reversed(blocks_b))
    assert queue_ids(pool) == [5, 6, 7, 2, 1, 4, 3]
    hit = pool.get_cached_block(a.block_hashes[0], [0])
    assert hit == [blocks_a[0]]
    pool.touch(hit)
    assert blocks_a[0].ref_cnt == 1 and queue_ids(pool) == [5, 6, 7, 2, 4, 3]
    pool.touch([blocks_a[0], blocks_a[0], pool.null_block])
    assert blocks_a[0].ref_cnt == 3
    # Exhaust the free queue: keyless first, then LRU keyed (a's tail before b's chain).
    got = pool.get_new_blocks(4)
    assert [blk.block_id for blk in got] == [5, 6, 7, 2]
    assert pool.get_cached_block(a.block_hashes[1], [0]) is None
    assert pool.get_cached_block(b.block_hashes[1], [0]) == [blocks_b[1]]
    check_invariants(pool)


def test_caching_disabled_frees_to_the_head() -> None:
    pool = BlockPool(5, enable_caching=False, hash_block_size=4)
    blocks = pool.get_new_blocks(3)
    pool.free_blocks(blocks)
    assert queue_ids(pool) == [1, 2, 3, 4]
    check_invariants(pool)


def test_cache_full_blocks_keys_and_prefix_lengths() -> None:
    pool = BlockPool(10, enable_caching=True, hash_block_size=4)
    req = _req(list(range(14)))
    blocks = pool.get_new_blocks(4)
    pool.cache_full_blocks(req, blocks, 0, 2, 4, 0)
    pool.cache_full_blocks(req, blocks, 2, 3, 4, 0)
    pool.cache_full_blocks(req, blocks, 3, 3, 4, 0)  # nothing new: no-op
    for i in range(3):
        key = blocks[i].block_hash
        assert key is not None
        assert get_block_hash(key) == req.block_hashes[i] and get_group_id(key) == 0
        assert blocks[i].block_hash_num_tokens == 4 * (i + 1)
    assert blocks[3].block_hash is None
    assert len(pool.cached_block_hash_to_block) == 3
    # Caching the same blocks again under the same keys changes nothing.
    before = snapshot(pool)
    pool.cache_full_blocks(req, blocks, 0, 3, 4, 0)
    assert snapshot(pool) == before
    check_invariants(pool)


def test_groups_are_separate_key_spaces() -> None:
    pool = BlockPool(10, enable_caching=True, hash_block_size=4)
    req = _req(list(range(12)))
    g0 = pool.get_new_blocks(2)
    g1 = pool.get_new_blocks(3)
    pool.cache_full_blocks(req, g0, 0, 2, 4, 0)
    pool.cache_full_blocks(req, g1, 0, 3, 4, 1)
    assert pool.get_cached_block(req.block_hashes[1], [0, 1]) == [g0[1], g1[1]]
    assert pool.get_cached_block(req.block_hashes[2], [1]) == [g1[2]]
    assert pool.get_cached_block(req.block_hashes[2], [0, 1]) is None
    check_invariants(pool)


def test_duplicates_share_a_key_until_the_last_copy_goes() -> None:
    pool = BlockPool(6, enable_caching=True, hash_block_size=4, enable_kv_cache_events=True)
    req = _req(list(range(4)))
    first = pool.get_new_blocks(1)
    second = pool.get_new_blocks(1)
    pool.cache_full_blocks(req, first, 0, 1, 4, 0)
    pool.cache_full_blocks(req, second, 0, 1, 4, 0)
    key = make_block_hash_with_group_id(req.block_hashes[0], 0)
    assert pool.cached_block_hash_to_block.num_blocks(key) == 2
    assert pool.get_cached_block(req.block_hashes[0], [0]) == first  # first cached wins
    pool.take_events()
    assert pool._maybe_evict_cached_block(first[0])
    assert pool.get_cached_block(req.block_hashes[0], [0]) == second
    assert pool.take_events() == []  # the key still reaches a block
    pool.evict_blocks({second[0].block_id})
    assert pool.get_cached_block(req.block_hashes[0], [0]) is None
    events = pool.take_events()
    assert len(events) == 1 and isinstance(events[0], BlockRemoved)
    check_invariants(pool)


def test_null_and_masked_blocks_are_never_keyed() -> None:
    pool = BlockPool(6, enable_caching=True, hash_block_size=2, enable_kv_cache_events=True)
    req = _req(list(range(8)), hbs=2)
    blocks = [pool.null_block, *pool.get_new_blocks(3)]
    pool.cache_full_blocks(req, blocks, 0, 4, 2, 0, block_mask=[True, True, False, True])
    assert pool.null_block.block_hash is None
    assert blocks[1].block_hash is not None and blocks[2].block_hash is None
    assert blocks[3].block_hash is not None
    events = pool.take_events()
    # two runs, each self-consistent: hashes, parent and tokens describe the same blocks
    assert len(events) == 2
    first, second = events
    assert isinstance(first, BlockStored) and isinstance(second, BlockStored)
    convert = maybe_convert_block_hash
    assert first.block_hashes == [convert(req.block_hashes[1])]
    assert first.parent_block_hash == convert(req.block_hashes[0])  # logical parent
    assert first.token_ids == [2, 3]
    assert second.block_hashes == [convert(req.block_hashes[3])]
    assert second.parent_block_hash == convert(req.block_hashes[2])
    assert second.token_ids == [6, 7]
    check_invariants(pool)


def test_coarse_blocks_use_the_last_fine_hash() -> None:
    pool = BlockPool(6, enable_caching=True, hash_block_size=2)
    req = _req(list(range(9)), hbs=2)  # 4 fine hashes, 2 coarse blocks of 4
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, 4, 0)
    assert [get_block_hash(b.block_hash) for b in blocks if b.block_hash] == [
        req.block_hashes[1],
        req.block_hashes[3],
    ]
    assert blocks[1].block_hash_num_tokens == 8
    check_invariants(pool)


def test_partial_entries_alias_promote_and_conflict() -> None:
    pool = BlockPool(6, enable_caching=True, hash_block_size=2, enable_kv_cache_events=True)
    req = _req(list(range(8)), hbs=2)
    (block,) = pool.get_new_blocks(1)
    key2 = pool.cache_partial_block(req, block, 2, 0, 8)
    assert block.block_hash == key2 and block.block_hash_num_tokens == 2
    assert pool.cache_partial_block(req, block, 2, 0, 8) == key2  # idempotent
    # a longer prefix replaces the shorter entry
    key4 = pool.cache_partial_block(req, block, 4, 0, 8)
    assert block.block_hash == key4 and pool.get_cached_block(req.block_hashes[0], [0]) is None
    # promotion by cache_full_blocks when the block fills
    pool.cache_full_blocks(req, [block], 0, 1, 8, 0)
    assert block.block_hash_num_tokens == 8
    # a shorter prefix on a keyed block becomes an alias
    alias = pool.cache_partial_block(req, block, 6, 0, 8)
    assert alias in pool.cached_block_hashes_by_block[block.block_id]
    assert pool.get_cached_block(req.block_hashes[2], [0]) == [block]
    # a different key for a length the block already has is refused
    other = _req([9, 9, 9, 9, 9, 9, 9, 9], hbs=2, rid="o")
    before = snapshot(pool)
    with pytest.raises(CacheConflictError):
        pool.cache_partial_block(other, block, 6, 0, 8)
    assert snapshot(pool) == before
    # replace_existing_hashes drops every old key
    pool.cache_partial_block(other, block, 4, 0, 8, replace_existing_hashes=True)
    assert pool.get_cached_block(req.block_hashes[3], [0]) is None
    assert pool.get_cached_block(req.block_hashes[2], [0]) is None
    assert pool.get_cached_block(other.block_hashes[1], [0]) == [block]
    assert pool.cache_partial_block(req, pool.null_block, 2, 0, 8) is None
    check_invariants(pool)


def test_evicting_a_free_block_with_an_alias_drops_both_keys() -> None:
    pool = BlockPool(3, enable_caching=True, hash_block_size=2)
    req = _req(list(range(4)), hbs=2)
    (block,) = pool.get_new_blocks(1)
    pool.cache_full_blocks(req, [block], 0, 1, 4, 0)
    pool.cache_partial_block(req, block, 2, 0, 4)
    pool.free_blocks([block])
    pool.get_new_blocks(2)
    assert len(pool.cached_block_hash_to_block) == 0
    assert block.block_id not in pool.cached_block_hashes_by_block
    check_invariants(pool)


def test_evict_blocks_keeps_held_blocks_held() -> None:
    pool = BlockPool(5, enable_caching=True, hash_block_size=4)
    req = _req(list(range(8)))
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, 4, 0)
    pool.evict_blocks({blocks[0].block_id, 0})
    assert blocks[0].block_hash is None and blocks[0].ref_cnt == 1
    assert blocks[1].block_hash is not None
    pool.free_blocks(reversed(blocks))
    assert queue_ids(pool)[0] == blocks[0].block_id  # now keyless: reused first
    check_invariants(pool)


def test_reset_prefix_cache_only_when_idle() -> None:
    pool = BlockPool(5, enable_caching=True, hash_block_size=4, enable_kv_cache_events=True)
    req = _req(list(range(8)))
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, 4, 0)
    before = snapshot(pool)
    assert pool.reset_prefix_cache() is False
    assert snapshot(pool) == before
    pool.free_blocks(blocks)
    assert pool.reset_prefix_cache() is True
    assert not pool.cached_block_hash_to_block
    assert all(b.block_hash is None for b in pool.blocks)
    assert type(pool.take_events()[-1]).__name__ == "AllBlocksCleared"
    check_invariants(pool)


def test_lookups_after_a_reset_read_the_new_map() -> None:
    pool = BlockPool(5, enable_caching=True, hash_block_size=4)
    req = _req(list(range(8)))
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, 4, 0)
    pool.free_blocks(blocks)
    assert pool.reset_prefix_cache() is True
    assert pool.get_cached_block(req.block_hashes[0], [0]) is None
    again = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, again, 0, 2, 4, 0)
    assert pool.get_cached_block(req.block_hashes[1], [0]) == [again[1]]
    # Every spelling of group 0 reaches the same key; a group past the precomputed suffixes too.
    assert pool.get_cached_block(req.block_hashes[1], [int("0")]) == [again[1]]
    assert pool.get_cached_block(req.block_hashes[1], [False]) == [again[1]]
    assert pool.get_cached_block(req.block_hashes[1], [70]) is None
    other = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, other, 0, 2, 4, 70)
    assert pool.get_cached_block(req.block_hashes[1], [70]) == [other[1]]
    assert pool.get_cached_block(req.block_hashes[1], [0, 70]) == [again[1], other[1]]
    with pytest.raises(OverflowError):
        pool.get_cached_block(req.block_hashes[1], [-1])
    check_invariants(pool)


def test_stale_keys_are_dropped_on_reuse_even_with_caching_off() -> None:
    pool = BlockPool(2, enable_caching=False, hash_block_size=4)
    req = _req(list(range(4)))
    blocks = pool.get_new_blocks(1)
    pool.cache_full_blocks(req, blocks, 0, 1, 4, 0)
    pool.free_blocks(blocks)
    pool.get_new_blocks(1)
    assert pool.get_cached_block(req.block_hashes[0], [0]) is None
    check_invariants(pool)


def test_emit_cached_block_events_announces_only_present_keys() -> None:
    pool = BlockPool(6, enable_caching=True, hash_block_size=4, enable_kv_cache_events=True)
    req = _req(list(range(12)))
    pool.emit_cached_block_events(req, 3, 4, 0)
    assert pool.take_events() == []
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, 4, 0)
    pool.take_events()
    pool.emit_cached_block_events(req, 3, 4, 0)
    (event,) = pool.take_events()
    assert isinstance(event, BlockStored)
    assert len(event.block_hashes) == 2 and event.parent_block_hash is None
    assert event.token_ids == list(range(8))
    assert snapshot(pool)["map"] == {
        b.block_hash: (b.block_id,) for b in blocks if b.block_hash is not None
    }


def test_move_block_hashes_repoints_every_key() -> None:
    pool = BlockPool(5, enable_caching=True, hash_block_size=2, enable_kv_cache_events=True)
    req = _req(list(range(4)), hbs=2)
    src, dst = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, [src], 0, 1, 4, 0)
    pool.cache_partial_block(req, src, 2, 0, 4)
    pool.take_events()
    pool.move_block_hashes(src, dst)
    assert src.block_hash is None and src.block_id not in pool.cached_block_hashes_by_block
    assert dst.block_hash_num_tokens == 4
    assert pool.get_cached_block(req.block_hashes[0], [0]) == [dst]
    assert pool.get_cached_block(req.block_hashes[1], [0]) == [dst]
    assert pool.take_events() == []
    before = snapshot(pool)
    with pytest.raises(CacheConflictError):
        pool.move_block_hashes(src, dst)
    with pytest.raises(CacheConflictError):
        pool.move_block_hashes(dst, pool.null_block)
    assert snapshot(pool) == before
    check_invariants(pool)


def test_unpin_blocks_notifies_on_reuse() -> None:
    pool = BlockPool(4, enable_caching=True, hash_block_size=4)
    blocks = pool.get_new_blocks(2)
    pool.touch([blocks[0]])
    reused: list[int] = []
    pool.unpin_blocks(blocks, lambda b: reused.append(b.block_id))
    assert blocks[0].ref_cnt == 1 and blocks[1].ref_cnt == 0
    assert queue_ids(pool) == [3, 2]  # unpinned blocks join the tail
    pool.get_new_blocks(2)
    assert reused == [2]
    check_invariants(pool)


def test_free_blocks_routes_other_pools_blocks() -> None:
    a = BlockPool(3, enable_caching=True, hash_block_size=4)
    b = BlockPool(3, enable_caching=True, hash_block_size=4)
    xa = a.get_new_blocks(1)
    xb = b.get_new_blocks(1)
    a.free_blocks([xa[0], xb[0], b.null_block])
    assert xa[0].ref_cnt == 0 and xb[0].ref_cnt == 0
    assert b.get_num_free_blocks() == 2
    check_invariants(a)
    check_invariants(b)


def test_is_block_writable() -> None:
    pool = BlockPool(4, enable_caching=True, hash_block_size=4)
    req = _req(list(range(4)))
    x, y = pool.get_new_blocks(2)
    assert pool.is_block_writable(x)
    pool.cache_full_blocks(req, [x], 0, 1, 4, 0)
    pool.touch([y])
    assert not pool.is_block_writable(x)
    assert not pool.is_block_writable(y)
    assert not pool.is_block_writable(pool.null_block)


class _Metrics:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def on_block_allocated(self, block: KVCacheBlock) -> None:
        self.calls.append(("allocated", block.block_id))

    def on_block_accessed(self, block: KVCacheBlock) -> None:
        self.calls.append(("accessed", block.block_id))

    def on_block_evicted(self, block: KVCacheBlock) -> None:
        self.calls.append(("evicted", block.block_id))

    def reset(self) -> None:
        self.calls.append(("reset", -1))


def test_metrics_collector_sees_allocation_access_eviction_reset() -> None:
    metrics = _Metrics()
    pool = BlockPool(3, enable_caching=True, hash_block_size=4, metrics_collector=metrics)
    (block,) = pool.get_new_blocks(1)
    pool.touch([block])
    pool.free_blocks([block, block])
    assert pool.reset_prefix_cache()
    assert metrics.calls == [("evicted", 1), ("allocated", 1), ("accessed", 1), ("reset", -1)]


def test_event_classes_are_pluggable() -> None:
    """An engine publishing events swaps in its own classes (same fields)."""
    import types
    from dataclasses import dataclass

    @dataclass
    class Stored:
        block_hashes: list[object]
        parent_block_hash: object
        token_ids: list[int]
        block_size: int
        lora_id: object
        medium: object
        lora_name: object
        extra_keys: object = None
        group_idx: object = None
        session_id: object = None
        lookahead_token_ids: object = None

    @dataclass
    class Removed:
        block_hashes: list[object]
        medium: object
        group_idx: object = None

    class Cleared:
        pass

    classes = types.SimpleNamespace(
        BlockStored=Stored, BlockRemoved=Removed, AllBlocksCleared=Cleared
    )

    class EnginePool(BlockPool):
        kv_event_classes = classes

    pool = EnginePool(3, enable_caching=True, hash_block_size=4, enable_kv_cache_events=True)
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(_req(list(range(4))), blocks, 0, 1, 4, 0)
    pool.free_blocks(blocks)
    pool.get_new_blocks(2)
    assert pool.reset_prefix_cache() is False
    pool.free_blocks(pool.blocks[1:])
    assert pool.reset_prefix_cache() is True
    assert [type(e) for e in pool.take_events()] == [Stored, Removed, Cleared]


def test_free_blocks_evict_first_queues_keyed_blocks_at_the_head() -> None:
    """0.34's ``evict_first``: every released block goes to the head in the given order, keyed
    or not; other pools' blocks are freed there the same way; a refusal changes nothing."""
    pool = BlockPool(6, enable_caching=True, hash_block_size=4)
    other = BlockPool(4, enable_caching=True, hash_block_size=4)
    req = _req(list(range(8)))
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, 4, 0)
    foreign = other.get_new_blocks(1)
    before = snapshot(pool)
    with pytest.raises(DoubleFreeError):
        pool.free_blocks([blocks[1], blocks[1], blocks[1]], evict_first=True)
    assert snapshot(pool) == before
    pool.free_blocks([blocks[1], blocks[0], foreign[0]], evict_first=True)
    assert queue_ids(pool)[:2] == [2, 1] and blocks[0].block_hash is not None
    assert queue_ids(other)[0] == foreign[0].block_id
    check_invariants(pool)
    check_invariants(other)
