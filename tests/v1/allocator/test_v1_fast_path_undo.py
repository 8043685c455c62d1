"""The v1 pool's hot paths check as they go: a refusal part-way through a call undoes what the
call had already done (counts, keys and their group-0 mirror, queue links), so the pool, its
blocks and its event queue are exactly as before."""

from __future__ import annotations

import pytest

from prefixcache.v1.core.block_pool import BlockPool
from prefixcache.v1.core.kv_cache_utils import KVCacheBlock
from prefixcache.v1.errors import (
    DoubleFreeError,
    ForeignBlockError,
    PoolArgumentError,
    UnheldBlockError,
)

from ._support import FakeRequest, check_invariants, queue_ids, snapshot


def _pool(num_blocks: int = 12) -> BlockPool:
    return BlockPool(num_blocks, enable_caching=True, hash_block_size=2,
                     enable_kv_cache_events=True)


@pytest.mark.parametrize("last", ["foreign", "duplicate", "free"])
def test_cache_full_blocks_refused_after_keying_some(last: str) -> None:
    pool = _pool()
    req = FakeRequest("r", list(range(8)), 2)
    blocks = pool.get_new_blocks(2)
    free = pool.get_new_blocks(1)
    pool.free_blocks(free)
    refused = {
        "foreign": BlockPool(4, True, 2).get_new_blocks(1)[0],
        "duplicate": blocks[0],
        "free": free[0],
    }[last]
    error = {"foreign": ForeignBlockError, "duplicate": PoolArgumentError,
             "free": UnheldBlockError}[last]
    before = snapshot(pool)
    with pytest.raises(error):
        pool.cache_full_blocks(req, [*blocks, refused], 0, 3, 2, 0)
    assert snapshot(pool) == before
    check_invariants(pool)
    assert pool.get_cached_block(req.block_hashes[0], [0]) is None
    pool.cache_full_blocks(req, blocks, 0, 2, 2, 0)  # and the same blocks key cleanly after
    assert pool.get_cached_block(req.block_hashes[1], [0]) == [blocks[1]]
    check_invariants(pool)


def test_duplicate_key_takes_checked_path_and_mirror_follows_first_block() -> None:
    pool = _pool()
    first, second = pool.get_new_blocks(2), pool.get_new_blocks(2)
    pool.cache_full_blocks(FakeRequest("a", [1, 2, 3, 4], 2), first, 0, 2, 2, 0)
    # Same tokens: the first key is already in the map, so the one-pass case stands aside.
    req = FakeRequest("b", [1, 2, 3, 4], 2)
    pool.cache_full_blocks(req, second, 0, 2, 2, 0)
    check_invariants(pool)
    assert pool.get_cached_block(req.block_hashes[0], [0]) == [first[0]]
    assert pool.cached_block_hash_to_block.num_blocks(second[0].block_hash) == 2  # type: ignore[arg-type]
    pool.evict_blocks([first[0].block_id])  # the first block leaves: the lookup moves on
    assert pool.get_cached_block(req.block_hashes[0], [0]) == [second[0]]
    check_invariants(pool)


@pytest.mark.parametrize("queue_empty", [False, True])
def test_free_blocks_refused_after_linking_some(queue_empty: bool) -> None:
    pool = _pool(6)
    req = FakeRequest("r", list(range(6)), 2)
    blocks = pool.get_new_blocks(5 if queue_empty else 3)
    pool.cache_full_blocks(req, blocks, 0, 3, 2, 0)
    pool.touch([blocks[0]])  # shared: drops to 1, stays held
    assert (queue_ids(pool) == []) is queue_empty
    before = snapshot(pool)
    # blocks[2] and blocks[1] reach zero (keyed: linked at the tail) before the refusal.
    with pytest.raises(DoubleFreeError):
        pool.free_blocks([blocks[2], blocks[1], blocks[0], blocks[2]])
    assert snapshot(pool) == before
    check_invariants(pool)
    with pytest.raises(ForeignBlockError):
        pool.free_blocks([blocks[2], blocks[1], KVCacheBlock(1)])
    assert snapshot(pool) == before
    pool.free_blocks([blocks[2], blocks[1], blocks[0]])
    assert queue_ids(pool)[-2:] == [blocks[2].block_id, blocks[1].block_id]
    check_invariants(pool)


@pytest.mark.parametrize("as_iterator", [False, True])
def test_touch_refused_after_counting_held_and_free_blocks(as_iterator: bool) -> None:
    pool = _pool()
    held = pool.get_new_blocks(2)
    free = pool.get_new_blocks(2)
    pool.free_blocks(free)
    entries = [held[0], free[0], held[1], free[0], pool.null_block, KVCacheBlock(3)]
    before = snapshot(pool)
    with pytest.raises(ForeignBlockError):
        pool.touch(iter(entries) if as_iterator else entries)  # type: ignore[arg-type]
    assert snapshot(pool) == before
    check_invariants(pool)
    pool.touch(iter(entries[:-1]) if as_iterator else entries[:-1])  # type: ignore[arg-type]
    assert [b.ref_cnt for b in (*held, *free)] == [2, 2, 2, 0]
    assert free[0].block_id not in queue_ids(pool)
    check_invariants(pool)
