"""Misuse of the v1 pool raises a typed error (also the builtin upstream raises, where it
raises one) and leaves the whole pool, its blocks and its event queue unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from prefixcache.errors import PrefixCacheError
from prefixcache.v1.core.block_pool import BlockPool
from prefixcache.v1.core.kv_cache_utils import FreeKVCacheBlockQueue, KVCacheBlock
from prefixcache.v1.errors import (
    CacheConflictError,
    DoubleFreeError,
    ForeignBlockError,
    FreeQueueError,
    InvalidBlockError,
    InvalidBlockIdError,
    MissingBlockHashesError,
    NoFreeBlocksError,
    PoolArgumentError,
    UnheldBlockError,
)

from ._support import FakeRequest, check_invariants, snapshot


class World:
    """A pool with events on and a little of everything: a held keyed chain, a held keyless
    block, free keyed blocks, an alias."""

    def __init__(self) -> None:
        self.pool = BlockPool(
            10, enable_caching=True, hash_block_size=2, enable_kv_cache_events=True
        )
        self.other = BlockPool(4, enable_caching=True, hash_block_size=2)
        self.req = FakeRequest("r", list(range(9)), 2)
        self.held = self.pool.get_new_blocks(3)
        self.pool.cache_full_blocks(self.req, self.held, 0, 2, 2, 0)
        self.pool.cache_partial_block(self.req, self.held[1], 2, 0, 2)
        free = self.pool.get_new_blocks(2)
        self.pool.cache_full_blocks(FakeRequest("f", [7, 7, 8, 8], 2), free, 0, 2, 2, 0)
        self.pool.free_blocks(reversed(free))
        self.free = free
        self.foreign = self.other.get_new_blocks(1)[0]


Case = tuple[str, Callable[[World], Any], type[BaseException], type[BaseException]]

CASES: list[Case] = [
    (
        "touch hand-made block",
        lambda w: w.pool.touch([KVCacheBlock(1)]),
        ForeignBlockError,
        ValueError,
    ),
    (
        "touch other pool's block after a valid one",
        lambda w: w.pool.touch([w.held[0], w.foreign]),
        ForeignBlockError,
        ValueError,
    ),
    (
        "touch free blocks, then a hand-made one",
        lambda w: w.pool.touch([w.free[1], w.free[0], w.pool.blocks[9], KVCacheBlock(2)]),
        ForeignBlockError,
        ValueError,
    ),
    (
        "free a free block",
        lambda w: w.pool.free_blocks([w.free[0]]),
        DoubleFreeError,
        AssertionError,
    ),
    (
        "free a held block twice in one call",
        lambda w: w.pool.free_blocks([w.held[2], w.held[2]]),
        DoubleFreeError,
        AssertionError,
    ),
    (
        "free a hand-made block",
        lambda w: w.pool.free_blocks([w.held[0], KVCacheBlock(3)]),
        ForeignBlockError,
        ValueError,
    ),
    (
        "free: other pool's block underflows",
        lambda w: w.pool.free_blocks([w.held[0], w.foreign, w.foreign]),
        DoubleFreeError,
        AssertionError,
    ),
    ("get_new_blocks too many", lambda w: w.pool.get_new_blocks(99), NoFreeBlocksError, ValueError),
    (
        "get_new_blocks negative",
        lambda w: w.pool.get_new_blocks(-1),
        PoolArgumentError,
        AssertionError,
    ),
    ("get_new_blocks float", lambda w: w.pool.get_new_blocks(1.0), PoolArgumentError, ValueError),
    (
        "cache a free block",
        lambda w: w.pool.cache_full_blocks(w.req, [w.free[0]], 0, 1, 2, 1),
        UnheldBlockError,
        ValueError,
    ),
    (
        "cache a hand-made block",
        lambda w: w.pool.cache_full_blocks(w.req, [KVCacheBlock(4)], 0, 1, 2, 0),
        ForeignBlockError,
        ValueError,
    ),
    (
        "cache a keyed block under another key",
        lambda w: w.pool.cache_full_blocks(FakeRequest("x", [5] * 4, 2), w.held, 0, 2, 2, 0),
        CacheConflictError,
        AssertionError,
    ),
    (
        "cache the same block twice in one call",
        lambda w: w.pool.cache_full_blocks(w.req, [w.held[2], w.held[2]], 0, 2, 2, 1),
        PoolArgumentError,
        ValueError,
    ),
    (
        "cache beyond the request's hashes",
        lambda w: w.pool.cache_full_blocks(w.req, w.held, 2, 3, 4, 0),
        MissingBlockHashesError,
        IndexError,
    ),
    (
        "cache with a short mask",
        lambda w: w.pool.cache_full_blocks(w.req, w.held, 2, 3, 2, 0, block_mask=[]),
        PoolArgumentError,
        AssertionError,
    ),
    (
        "cache more blocks than given",
        lambda w: w.pool.cache_full_blocks(w.req, w.held, 2, 4, 2, 0),
        PoolArgumentError,
        ValueError,
    ),
    (
        "cache at a block size not a multiple of hash_block_size",
        lambda w: w.pool.cache_full_blocks(w.req, w.held, 2, 3, 3, 0),
        PoolArgumentError,
        AssertionError,
    ),
    (
        "cache under a negative group",
        lambda w: w.pool.cache_full_blocks(w.req, w.held, 2, 3, 2, -1),
        PoolArgumentError,
        ValueError,
    ),
    (
        "partial entry misaligned",
        lambda w: w.pool.cache_partial_block(w.req, w.held[2], 3, 0, 2),
        PoolArgumentError,
        AssertionError,
    ),
    (
        "partial entry of zero tokens",
        lambda w: w.pool.cache_partial_block(w.req, w.held[2], 0, 0, 2),
        PoolArgumentError,
        AssertionError,
    ),
    (
        "partial entry beyond the hashes",
        lambda w: w.pool.cache_partial_block(w.req, w.held[2], 10, 0, 2),
        MissingBlockHashesError,
        IndexError,
    ),
    (
        "partial entry on a free block",
        lambda w: w.pool.cache_partial_block(w.req, w.free[0], 2, 1, 2),
        UnheldBlockError,
        ValueError,
    ),
    (
        "partial entry conflicting with the primary key's length",
        lambda w: w.pool.cache_partial_block(FakeRequest("y", [3] * 4, 2), w.held[1], 4, 0, 2),
        CacheConflictError,
        AssertionError,
    ),
    (
        "evict a negative id after a valid one",
        lambda w: w.pool.evict_blocks([1, -1]),
        InvalidBlockIdError,
        AssertionError,
    ),
    (
        "evict an id past the end",
        lambda w: w.pool.evict_blocks({10}),
        InvalidBlockIdError,
        AssertionError,
    ),
    (
        "unpin the null block",
        lambda w: w.pool.unpin_blocks([w.pool.null_block], print),
        InvalidBlockError,
        ValueError,
    ),
    (
        "unpin a free block",
        lambda w: w.pool.unpin_blocks([w.held[0], w.free[1]], print),
        DoubleFreeError,
        AssertionError,
    ),
    (
        "move keys onto a keyed block",
        lambda w: w.pool.move_block_hashes(w.held[0], w.held[1]),
        CacheConflictError,
        AssertionError,
    ),
    (
        "move keys to another pool's block",
        lambda w: w.pool.move_block_hashes(w.held[0], w.foreign),
        ForeignBlockError,
        ValueError,
    ),
    (
        "evict a hand-made block's keys",
        lambda w: w.pool._maybe_evict_cached_block(KVCacheBlock(2)),
        ForeignBlockError,
        ValueError,
    ),
    (
        "set a second primary key",
        lambda w: w.held[0].set_block_hash(b"x" * 36),
        CacheConflictError,
        AssertionError,
    ),
    (
        "queue: remove a held block",
        lambda w: w.pool.free_block_queue.remove(w.held[0]),
        FreeQueueError,
        RuntimeError,
    ),
    (
        "queue: append a queued block",
        lambda w: w.pool.free_block_queue.append(w.free[0]),
        FreeQueueError,
        RuntimeError,
    ),
    (
        "queue: prepend one block twice",
        lambda w: w.pool.free_block_queue.prepend_n([w.held[2], w.held[2]]),
        FreeQueueError,
        RuntimeError,
    ),
    (
        "queue: pop more than queued",
        lambda w: w.pool.free_block_queue.popleft_n(99),
        NoFreeBlocksError,
        ValueError,
    ),
]


@pytest.mark.parametrize(("name", "call", "error", "builtin"), CASES, ids=[c[0] for c in CASES])
def test_misuse_raises_typed_error_and_changes_nothing(
    name: str,
    call: Callable[[World], Any],
    error: type[BaseException],
    builtin: type[BaseException],
) -> None:
    world = World()
    check_invariants(world.pool)
    before = snapshot(world.pool)
    other_before = snapshot(world.other)
    with pytest.raises(error) as info:
        call(world)
    assert isinstance(info.value, PrefixCacheError) and isinstance(info.value, builtin)
    assert snapshot(world.pool) == before, name
    assert snapshot(world.other) == other_before, name
    check_invariants(world.pool)


def test_null_block_in_touch_and_free_is_skipped_not_misuse() -> None:
    # Sliding-window block tables hold the null block; engines touch and free it routinely.
    world = World()
    before = snapshot(world.pool)
    world.pool.touch([world.pool.null_block])
    world.pool.free_blocks([world.pool.null_block])
    assert snapshot(world.pool) == before


@pytest.mark.parametrize(
    ("kwargs", "builtin"),
    [
        ({"num_gpu_blocks": 0, "hash_block_size": 4}, AssertionError),
        ({"num_gpu_blocks": 4, "hash_block_size": 0}, AssertionError),
        ({"num_gpu_blocks": 4.0, "hash_block_size": 4}, AssertionError),
        (
            {"num_gpu_blocks": 4, "hash_block_size": 4, "num_hash_lookahead_tokens": -1},
            AssertionError,
        ),
    ],
)
def test_bad_construction(kwargs: dict[str, Any], builtin: type[BaseException]) -> None:
    with pytest.raises(PoolArgumentError) as info:
        BlockPool(enable_caching=True, **kwargs)
    assert isinstance(info.value, builtin)


def test_queue_popleft_on_empty_queue() -> None:
    queue = FreeKVCacheBlockQueue([])
    with pytest.raises(NoFreeBlocksError):
        queue.popleft()
    assert queue.num_free_blocks == 0 and queue.get_all_free_blocks() == []


def test_queue_states_upstream_asserts_raise_an_assertion_error_too() -> None:
    """Upstream asserts these queue states and its own tests expect ``AssertionError``: a block
    queued twice, and a tail sentinel whose link was broken from outside."""
    queue = FreeKVCacheBlockQueue([KVCacheBlock(block_id=0)])
    with pytest.raises(AssertionError):
        queue.append(queue.fake_free_list_head.next_free_block)  # type: ignore[arg-type]
    broken = FreeKVCacheBlockQueue([])
    broken.fake_free_list_tail.prev_free_block = None
    with pytest.raises(AssertionError):
        broken._append_unchecked([KVCacheBlock(block_id=1)])
    assert broken.num_free_blocks == 0


@pytest.mark.parametrize("flag", [False, True])
def test_lookahead_given_as_a_flag_counts_as_zero_or_one(flag: bool) -> None:
    """vLLM 0.33's own tests pass ``num_hash_lookahead_tokens`` as a bool and upstream takes it
    as 0 or 1; the pool and the request hasher do the same (a float or a negative still fails)."""
    from prefixcache.v1.core.kv_cache_utils import get_request_block_hasher
    from prefixcache.v1.hashing import sha256

    pool = BlockPool(4, True, 2, num_hash_lookahead_tokens=flag)
    assert type(pool.num_hash_lookahead_tokens) is int
    assert pool.num_hash_lookahead_tokens == int(flag)
    get_request_block_hasher(2, sha256, flag)
    with pytest.raises(PoolArgumentError):
        BlockPool(4, True, 2, num_hash_lookahead_tokens=1.0)


def test_touch_with_a_foreign_block_late_in_the_list_changes_nothing() -> None:
    """touch checks and applies in one pass: a foreign entry after free and held ones undoes
    the references and the queue unlinks before it (the free queue's exact order too)."""
    pool = BlockPool(8, True, 2)
    held = pool.get_new_blocks(3)
    pool.free_blocks([held[1]])  # one free block in the middle of the queue's tail part
    before = snapshot(pool)
    order = [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]
    free_block = pool.blocks[held[1].block_id]
    with pytest.raises(ForeignBlockError):
        pool.touch([held[0], free_block, free_block, pool.null_block, KVCacheBlock(3)])
    assert snapshot(pool) == before
    assert [b.block_id for b in pool.free_block_queue.get_all_free_blocks()] == order
    check_invariants(pool)
