"""The bundled SGLang reference: each contract clause, and misuse -> typed error, no change."""

from __future__ import annotations

import copy
import random

import pytest

from prefixcache.sglang.errors import (
    DoubleFreeError,
    InvalidArgumentError,
    InvalidSlotError,
    LockUnderflowError,
    NodeNotInTreeError,
    ReceiptMismatchError,
    SGLangCacheError,
)
from prefixcache.sglang.srt.mem_cache.allocator import (
    PagedTokenToKVPoolAllocator,
    TokenToKVPoolAllocator,
)
from prefixcache.sglang.srt.mem_cache.base_prefix_cache import (
    DecLockRefParams,
    EvictParams,
    InsertParams,
    MatchPrefixParams,
)
from prefixcache.sglang.srt.mem_cache.cache_init_params import CacheInitParams
from prefixcache.sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey, TreeNode


def make(size: int = 64, page_size: int = 1
         ) -> tuple[RadixCache, TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator]:
    alloc: TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator = (
        TokenToKVPoolAllocator(size) if page_size == 1
        else PagedTokenToKVPoolAllocator(size, page_size))
    return RadixCache(CacheInitParams(False, None, alloc, page_size)), alloc


def put(cache: RadixCache, alloc: TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator,
        tokens: list[int], extra_key: str | None = None) -> tuple[int, list[int]]:
    """A request's prefill: match, allocate the rest, insert with the match as prev."""
    m = cache.match_prefix(MatchPrefixParams(RadixKey(tokens, extra_key)))
    ps = cache.page_size
    need = len(tokens) // ps * ps - m.device_prefix_len
    fresh = alloc.alloc(need)
    assert fresh is not None
    slots = m.device_indices + fresh
    res = cache.insert(InsertParams(RadixKey(tokens, extra_key), slots,
                                    prev_prefix_len=m.device_prefix_len))
    return res.prefix_len, slots


def _tree(node: TreeNode) -> object:
    return (node.id, tuple(node.key), tuple(node.value), node.lock_ref, node.last_access_time,
            tuple(sorted((repr(k), _tree(c)) for k, c in node.children.items())))


def _alloc_state(alloc: TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator) -> object:
    return (list(alloc.free_pages), list(alloc.release_pages), sorted(alloc._allocated),
            copy.deepcopy(alloc.free_group))


def state(cache: RadixCache,
          alloc: TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator) -> object:
    """Everything observable (tree shape, counts, candidates, allocator), to assert failure
    atomicity."""
    return (_tree(cache.root_node), cache.evictable_size_, cache.protected_size_,
            sorted(n.id for n in cache.evictable_leaves),
            sorted((a, b) for a, b, _ in cache._heap), _alloc_state(alloc))


def owned(cache: RadixCache, alloc: TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator,
          held: list[int]) -> None:
    """Tree, requests (``held``) and free list partition the pool 1..size."""
    tree = cache.all_values_flatten()
    free = [p * alloc.page_size + i for p in [*alloc.free_pages, *alloc.release_pages]
            for i in range(alloc.page_size)] if alloc.page_size > 1 else [
                *alloc.free_pages, *alloc.release_pages]
    everything = sorted(tree + held + free)
    assert everything == list(range(alloc.page_size if alloc.page_size > 1 else 1,
                                    (alloc.num_pages + 1) * alloc.page_size
                                    if alloc.page_size > 1 else alloc.size + 1))


# --------------------------------------------------------------------------- #
# Match and insert
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("page_size", [1, 4])
def test_match_returns_the_slots_of_exactly_the_matched_tokens(page_size: int) -> None:
    cache, alloc = make(64 * page_size, page_size)
    tokens = list(range(100, 100 + 6 * page_size))
    _, slots = put(cache, alloc, tokens)
    query = tokens[: 3 * page_size] + [7] * (page_size + 1)
    m = cache.match_prefix(MatchPrefixParams(RadixKey(query)))
    assert m.device_prefix_len == 3 * page_size
    assert m.device_indices == slots[: 3 * page_size]
    assert cache.path_device_indices(m.last_device_node) == m.device_indices
    assert cache.total_size() == 6 * page_size  # the split changed no size
    cache.sanity_check()


def test_keys_are_truncated_to_pages() -> None:
    cache, alloc = make(64, 4)
    slots = alloc.alloc(8)
    assert slots is not None
    res = cache.insert(InsertParams(RadixKey([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), [*slots, 0, 0]))
    assert (res.prefix_len, cache.total_size()) == (0, 8)
    assert cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3]))).device_prefix_len == 0
    m = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3, 4, 5, 6, 0])))
    assert m.device_prefix_len == 4  # a partial page never matches


def test_insert_frees_the_duplicates_and_keeps_ownership_a_partition() -> None:
    cache, alloc = make(32)
    _, a = put(cache, alloc, [1, 2, 3, 4])
    b = alloc.alloc(6)
    assert b is not None
    res = cache.insert(InsertParams(RadixKey([1, 2, 3, 9, 9, 9]), b))  # no prev: 3 duplicates
    assert res.prefix_len == 3
    assert not any(alloc.allocated(s) for s in b[:3])  # freed by insert
    assert all(alloc.allocated(s) for s in b[3:])
    owned(cache, alloc, [])
    assert cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3, 9]))).device_indices == \
        [*a[:3], b[3]]
    cache.sanity_check()


def test_insert_with_prev_prefix_frees_nothing_the_tree_lent() -> None:
    cache, alloc = make(32)
    put(cache, alloc, [1, 2, 3, 4])
    before = alloc.available_size()
    prefix, _ = put(cache, alloc, [1, 2, 3, 4, 5, 6])
    assert prefix == 4 and alloc.available_size() == before - 2
    owned(cache, alloc, [])


def test_namespaces_never_share_a_node() -> None:
    cache, alloc = make(32)
    put(cache, alloc, [1, 2, 3], extra_key="lora-a")
    assert cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3], "lora-b"))
                              ).device_prefix_len == 0
    assert cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3]))).device_prefix_len == 0
    prefix, _ = put(cache, alloc, [1, 2, 3], extra_key="lora-b")
    assert prefix == 0 and cache.total_size() == 6
    ma = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2], "lora-a"))).last_device_node
    mb = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2], "lora-b"))).last_device_node
    assert ma is not mb
    cache.sanity_check()


# --------------------------------------------------------------------------- #
# Locks and sizes
# --------------------------------------------------------------------------- #


def test_lock_moves_tokens_between_evictable_and_protected() -> None:
    cache, alloc = make(32)
    put(cache, alloc, [1, 2, 3, 4])
    put(cache, alloc, [1, 2, 7])
    node = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 7]))).last_device_node
    receipt = cache.inc_lock_ref(node)
    assert receipt.delta == -3 and cache.protected_size() == 3 and cache.evictable_size() == 2
    assert cache.evictable_size() + cache.protected_size() == cache.total_size() == 5
    assert cache.dec_lock_ref(node, receipt.to_dec_params()).delta == 3
    assert cache.protected_size() == 0
    cache.sanity_check()


def test_double_unlock_is_a_typed_error_and_changes_nothing() -> None:
    cache, alloc = make(32)
    put(cache, alloc, [1, 2, 3])
    lock = cache.lock(cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3]))).last_device_node)
    cache.unlock(lock)
    before = state(cache, alloc)
    with pytest.raises(LockUnderflowError):
        cache.unlock(lock)
    assert state(cache, alloc) == before


def test_receipt_of_another_node_is_refused() -> None:
    cache, alloc = make(32)
    put(cache, alloc, [1, 2, 3])
    put(cache, alloc, [5, 6])
    a = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3]))).last_device_node
    b = cache.match_prefix(MatchPrefixParams(RadixKey([5, 6]))).last_device_node
    ra = cache.inc_lock_ref(a)
    cache.inc_lock_ref(b)
    before = state(cache, alloc)
    with pytest.raises(ReceiptMismatchError):
        cache.dec_lock_ref(b, ra.to_dec_params())
    assert state(cache, alloc) == before


def test_foreign_and_evicted_nodes_are_refused() -> None:
    cache, alloc = make(32)
    other, _ = make(32)
    put(cache, alloc, [1, 2])
    put(other, _, [1, 2])
    foreign = other.match_prefix(MatchPrefixParams(RadixKey([1, 2]))).last_device_node
    node = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2]))).last_device_node
    cache.evict(EvictParams(2))
    assert node.evicted
    before = state(cache, alloc)
    for bad in (foreign, node):
        with pytest.raises(NodeNotInTreeError):
            cache.inc_lock_ref(bad)
        with pytest.raises(NodeNotInTreeError):
            cache.dec_lock_ref(bad, DecLockRefParams(bad.id))
    assert state(cache, alloc) == before


def test_a_split_keeps_the_locks() -> None:
    cache, alloc = make(32)
    put(cache, alloc, [1, 2, 3, 4])
    leaf = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3, 4]))).last_device_node
    lock = cache.lock(leaf)
    mid = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 9]))).last_device_node
    assert mid is not leaf and mid.lock_ref == 1 and leaf.parent is mid
    assert cache.protected_size() == 4
    assert cache.evict(EvictParams(10)).num_tokens_evicted == 0
    cache.unlock(lock)
    assert cache.protected_size() == 0 and cache.evictable_size() == 4
    cache.sanity_check()


# --------------------------------------------------------------------------- #
# Eviction
# --------------------------------------------------------------------------- #


def test_eviction_is_lru_over_unlocked_leaves_and_frees_each_slot_once() -> None:
    cache, alloc = make(64)
    _, a = put(cache, alloc, [1, 1, 1])
    _, b = put(cache, alloc, [2, 2, 2])
    _, c = put(cache, alloc, [3, 3, 3])
    cache.match_prefix(MatchPrefixParams(RadixKey([1, 1, 1])))  # a is now the newest
    lock = cache.lock(cache.match_prefix(MatchPrefixParams(RadixKey([3, 3]))).last_device_node)
    res = cache.evict(EvictParams(1))
    assert res.evicted_indices == b  # whole leaf, LRU: b is older than a; c's prefix locked
    res = cache.evict(EvictParams(100))
    assert sorted(res.evicted_indices) == sorted(a + c[2:])
    assert cache.total_size() == cache.protected_size() == 2
    cache.unlock(lock)
    assert cache.evict(EvictParams(100)).evicted_indices == c[:2]
    assert alloc.available_size() == 64
    owned(cache, alloc, [])


def test_a_locked_nodes_ancestors_survive_eviction() -> None:
    cache, alloc = make(64)
    put(cache, alloc, [1, 2, 3, 4])
    put(cache, alloc, [1, 2, 5, 6])
    lock = cache.lock(cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 5, 6]))
                                         ).last_device_node)
    cache.evict(EvictParams(100))
    assert cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 5, 6]))).device_prefix_len == 4
    assert cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3, 4]))).device_prefix_len == 2
    cache.unlock(lock)


def test_negative_eviction_is_refused() -> None:
    cache, _ = make(8)
    with pytest.raises(InvalidArgumentError):
        cache.evict(EvictParams(-1))


# --------------------------------------------------------------------------- #
# Insert misuse
# --------------------------------------------------------------------------- #


def test_insert_misuse_changes_nothing() -> None:
    cache, alloc = make(16)
    put(cache, alloc, [1, 2, 3])
    free_slot = alloc.free_pages[0]
    before = state(cache, alloc)
    with pytest.raises(InvalidArgumentError):  # value shorter than the key
        cache.insert(InsertParams(RadixKey([4, 5, 6]), [4, 5]))
    with pytest.raises(InvalidArgumentError):  # a free slot would become the tree's
        cache.insert(InsertParams(RadixKey([4]), [free_slot]))
    with pytest.raises(InvalidArgumentError):
        cache.insert(InsertParams(RadixKey([4]), [4], prev_prefix_len=-1))
    assert state(cache, alloc) == before


# --------------------------------------------------------------------------- #
# Allocators
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("page_size", [1, 4])
def test_allocator_rejects_double_and_foreign_frees_atomically(page_size: int) -> None:
    alloc = (TokenToKVPoolAllocator(16) if page_size == 1
             else PagedTokenToKVPoolAllocator(16, page_size))
    got = alloc.alloc(2 * page_size)
    assert got is not None and 0 not in got
    alloc.free(got[:page_size])
    before = _alloc_state(alloc)
    with pytest.raises(DoubleFreeError):
        alloc.free(got)  # the first page is free already
    with pytest.raises(InvalidSlotError):
        alloc.free([17 * page_size])
    with pytest.raises(InvalidSlotError):
        alloc.free([0])
    never = alloc.free_pages[-1] * page_size
    with pytest.raises(DoubleFreeError):
        alloc.free([never])
    assert _alloc_state(alloc) == before
    assert alloc.available_size() <= alloc.size


def test_token_allocator_repeated_slot_in_one_free() -> None:
    alloc = TokenToKVPoolAllocator(8)
    got = alloc.alloc(2)
    assert got is not None
    with pytest.raises(DoubleFreeError):
        alloc.free([got[0], got[0]])
    assert alloc.available_size() == 6


def test_allocator_order_and_exhaustion() -> None:
    alloc = TokenToKVPoolAllocator(4)
    assert alloc.alloc(3) == [1, 2, 3]
    assert alloc.alloc(2) is None
    alloc.free([2, 1])
    assert alloc.alloc(3) == [4, 2, 1]  # FIFO: freed slots go to the back
    paged = PagedTokenToKVPoolAllocator(16, 4)
    assert paged.alloc(8) == [4, 5, 6, 7, 8, 9, 10, 11]
    paged.free([8, 9, 10, 11])
    assert paged.alloc(4) == [8, 9, 10, 11]  # LIFO pages
    with pytest.raises(InvalidArgumentError):
        paged.alloc(3)


def test_free_group_defers_and_still_checks() -> None:
    alloc = TokenToKVPoolAllocator(8)
    got = alloc.alloc(4)
    assert got is not None
    alloc.free_group_begin()
    alloc.free(got[:2])
    with pytest.raises(DoubleFreeError):
        alloc.free(got[:1])
    assert alloc.available_size() == 4
    alloc.free_group_end()
    assert alloc.available_size() == 6
    with pytest.raises(InvalidArgumentError):
        alloc.free_group_end()


def test_need_sort_merges_in_order() -> None:
    alloc = TokenToKVPoolAllocator(4, need_sort=True)
    got = alloc.alloc(4)
    assert got is not None
    alloc.free([3, 1])
    assert alloc.available_size() == 2
    assert alloc.alloc(2) == [1, 3]


# --------------------------------------------------------------------------- #
# A seeded scheduler-like run: the invariants hold after every step
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("page_size", [1, 2])
def test_random_run_keeps_every_invariant(page_size: int) -> None:
    rng = random.Random(20251206 + page_size)
    cache, alloc = make(96, page_size)
    locks: list[tuple[object, list[int]]] = []
    for _ in range(400):
        op = rng.random()
        if op < 0.5:
            tokens = [rng.randrange(3) for _ in range(rng.randrange(1, 12))]
            m = cache.match_prefix(MatchPrefixParams(RadixKey(tokens)))
            need = len(tokens) // page_size * page_size - m.device_prefix_len
            if alloc.available_size() < need:
                cache.evict(EvictParams(need))
            fresh = alloc.alloc(need)
            if fresh is None:
                continue
            res = cache.insert(InsertParams(RadixKey(tokens), m.device_indices + fresh,
                                            prev_prefix_len=m.device_prefix_len))
            locks.append((cache.lock(res.last_device_node), []))
        elif op < 0.8 and locks:
            lock, _ = locks.pop(rng.randrange(len(locks)))
            cache.unlock(lock)  # type: ignore[arg-type]
        else:
            cache.evict(EvictParams(rng.randrange(1, 10)))
        cache.sanity_check()
        owned(cache, alloc, [])
    for lock, _ in locks:
        cache.unlock(lock)  # type: ignore[arg-type]
    cache.evict(EvictParams(10**6))
    assert alloc.available_size() == alloc.num_pages * page_size and cache.total_size() == 0


def test_errors_are_prefixcache_errors() -> None:
    assert issubclass(LockUnderflowError, SGLangCacheError)
    assert isinstance(TreeNode(5, None, [], [], None, 0), TreeNode)
