"""The v1 pool's hot paths check as they go: a refusal part-way through a call undoes what the
call had already done (counts, keys and their group-0 mirror, queue links), so the pool, its
blocks and its event queue are exactly as before."""

from __future__ import annotations

import copy
import pickle

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


@pytest.mark.parametrize("evicted_group", [0, 1])
def test_eviction_drops_the_group_0_mirror_entry_only_for_a_group_0_key(
    evicted_group: int,
) -> None:
    # Two groups key one block each under the same request hash (a hybrid model's groups share
    # hash_block_size): evicting one group's block keeps the other group's entry reachable.
    pool = _pool(4)
    req = FakeRequest("r", [1, 2], 2)
    group0, group1 = pool.get_new_blocks(1)[0], pool.get_new_blocks(1)[0]
    pool.cache_full_blocks(req, [group0], 0, 1, 2, 0)
    pool.cache_full_blocks(req, [group1], 0, 1, 2, 1)
    evicted, kept = (group0, group1) if evicted_group == 0 else (group1, group0)
    pool.free_blocks([evicted])
    pool.free_blocks([pool.get_new_blocks(1)[0]])  # the keyless third block: head, then reused
    assert pool.get_new_blocks(2)[1] is evicted  # the keyless block first, then the evicted one
    check_invariants(pool)
    assert evicted.block_hash is None
    assert pool.get_cached_block(req.block_hashes[0], [evicted_group]) is None
    assert pool.get_cached_block(req.block_hashes[0], [1 - evicted_group]) == [kept]


@pytest.mark.parametrize(("cached", "full"), [
    (0, -1), (2, -1), (-1, 2), (True, 2), (0, True), (0, 2.0), (None, 2), (1, "2"),
])
def test_cache_full_blocks_refuses_bad_counts_unchanged(cached: object, full: object) -> None:
    # The counts are checked together (one test for the types and the cached count, the full
    # count's sign only when nothing is to be keyed): every bad pair is still refused.
    pool = _pool()
    req = FakeRequest("r", list(range(8)), 2)
    blocks = pool.get_new_blocks(4)
    before = snapshot(pool)
    with pytest.raises(PoolArgumentError):
        pool.cache_full_blocks(req, blocks, cached, full, 2, 0)  # type: ignore[arg-type]
    assert snapshot(pool) == before
    check_invariants(pool)


def _impostors(pool: BlockPool, block: KVCacheBlock) -> dict[str, object]:
    """Objects that look like ``block`` (same id, same fields, ``pool=pool``) but are not it."""
    forged = KVCacheBlock(block.block_id, ref_cnt=block.ref_cnt, pool=pool)
    return {"copy": copy.copy(block), "deepcopy": copy.deepcopy(block),
            "pickled": pickle.loads(pickle.dumps(block)), "forged": forged}


@pytest.mark.parametrize("kind", ["copy", "deepcopy", "pickled", "forged"])
def test_hot_paths_refuse_a_lookalike_of_a_held_block(kind: str) -> None:
    # The hot paths test ownership by the pool's stamp (``_owner``), which no copy carries:
    # a lookalike of a held block is refused by every path, and the pool is unchanged.
    pool = _pool()
    req = FakeRequest("r", list(range(8)), 2)
    held = pool.get_new_blocks(3)
    impostor = _impostors(pool, held[1])[kind]
    # (A deep copy of a block copies its pool too, which stamps the copy as its own.)
    assert getattr(impostor, "_owner", None) is not pool
    before = snapshot(pool)
    calls = [lambda: pool.touch([held[0], impostor]),  # type: ignore[list-item]
             lambda: pool.cache_full_blocks(req, [held[0], impostor], 0, 2, 2, 0)]
    if kind in ("copy", "forged"):  # (the others are blocks of a copied pool: freed there)
        calls.append(lambda: pool.free_blocks([held[0], impostor]))  # type: ignore[list-item]
    for call in calls:
        with pytest.raises(ForeignBlockError):
            call()
        assert snapshot(pool) == before
        check_invariants(pool)


@pytest.mark.parametrize("how", ["deepcopy", "pickle", "shallow"])
def test_copied_pool_owns_its_blocks_and_refuses_the_original_s(how: str) -> None:
    pool = _pool()
    req = FakeRequest("r", list(range(8)), 2)
    pool.cache_full_blocks(req, pool.get_new_blocks(2), 0, 2, 2, 0)
    copied = {"deepcopy": copy.deepcopy, "pickle": lambda p: pickle.loads(pickle.dumps(p)),
              "shallow": copy.copy}[how](pool)
    blocks = copied.blocks[1:3]
    copied.touch(blocks)
    copied.free_blocks(blocks)
    copied.cache_full_blocks(req, copied.get_new_blocks(3), 0, 3, 2, 0)
    check_invariants(copied)
    if how == "shallow":  # both pools share one set of blocks: the original still frees them
        pool.free_blocks(blocks)
        assert [b.ref_cnt for b in blocks] == [0, 0]
        check_invariants(pool)
        return
    check_invariants(pool)
    before = snapshot(copied)
    with pytest.raises(ForeignBlockError):
        copied.touch([pool.blocks[1]])
    copied.free_blocks([pool.blocks[1]])  # the original's block: freed there, not here
    assert snapshot(copied) == before
    assert pool.blocks[1].ref_cnt == 0
    check_invariants(pool)
