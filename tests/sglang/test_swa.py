"""FULL + SWA: the bundled ``SWARadixCache`` clause by clause (windows, tombstones, recovery,
typed errors without change), and the SWA judge on hand-written programs, including ones a
broken cache fails."""

from __future__ import annotations

import copy

import pytest

from models.core.invariants import Violation
from models.families.sglang.ops import (
    Arrive,
    Evict,
    Finish,
    Match,
    ReleaseWindow,
    TreeConfig,
    Unlock,
)
from prefixcache.sglang.errors import (
    DoubleFreeError,
    InvalidArgumentError,
    LockUnderflowError,
    SGLangCacheError,
    TombstonedWindowError,
)
from prefixcache.sglang.srt.mem_cache.base_prefix_cache import (
    EvictParams,
    InsertParams,
    MatchPrefixParams,
)
from prefixcache.sglang.srt.mem_cache.cache_init_params import CacheInitParams
from prefixcache.sglang.srt.mem_cache.radix_cache import RadixKey
from prefixcache.sglang.srt.mem_cache.swa_allocator import SWATokenToKVPoolAllocator
from prefixcache.sglang.srt.mem_cache.swa_radix_cache import SWARadixCache
from properties.families.sglang.swa_judge import SWATreeJudge
from properties.families.sglang.targets import BUNDLED_SWA_SPEC, tree_target


def make(size: int = 16, size_swa: int = 16, window: int = 2
         ) -> tuple[SWARadixCache, SWATokenToKVPoolAllocator]:
    alloc = SWATokenToKVPoolAllocator(size, size_swa, 1)
    return SWARadixCache(CacheInitParams(False, None, alloc, 1,  # type: ignore[arg-type]
                                         sliding_window_size=window)), alloc


def put(cache: SWARadixCache, alloc: SWATokenToKVPoolAllocator, tokens: list[int]) -> list[int]:
    m = cache.match_prefix(MatchPrefixParams(RadixKey(tokens)))
    fresh = alloc.alloc(len(tokens) - m.device_prefix_len)
    assert fresh is not None
    slots = list(m.device_indices) + fresh
    cache.insert(InsertParams(RadixKey(tokens), slots, prev_prefix_len=m.device_prefix_len))
    return slots


def matched(cache: SWARadixCache, tokens: list[int]) -> int:
    return cache.match_prefix(MatchPrefixParams(RadixKey(tokens))).device_prefix_len


def test_swa_eviction_cuts_matches_back_to_a_whole_window() -> None:
    cache, alloc = make(window=2)
    slots = put(cache, alloc, [1, 2, 3, 4, 5, 6])
    # Lock [1..4]: its window is tokens 3, 4; the rest may lose SWA KV.
    node = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3, 4]))).last_device_node
    lock = cache.lock(node)
    assert (cache.swa_evictable_size(), cache.swa_protected_size()) == (4, 2)
    result = cache.evict(EvictParams(0, 6))
    assert result.swa_num_tokens_evicted == 4 and result.num_tokens_evicted == 0
    assert alloc.translate_loc_from_full_to_swa(slots[2:4]) != [0, 0]
    assert alloc.translate_loc_from_full_to_swa(slots[4:]) == [0, 0]
    assert matched(cache, [1, 2, 3, 4, 5, 6]) == 4  # 5, 6 tombstoned: cut back to 4
    assert matched(cache, [1, 2, 3]) == 0  # tokens 1, 2 tombstoned: 3's window lacks 2
    cache.unlock(lock)
    cache.sanity_check()


def test_reinsert_over_a_tombstone_keeps_the_locked_full_slot() -> None:
    cache, alloc = make(window=1)
    first = put(cache, alloc, [1, 2, 3])
    node = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3]))).last_device_node
    lock = cache.lock(node)  # window: token 3; tokens 1, 2 may be tombstoned
    cache.evict(EvictParams(0, 2))
    assert alloc.translate_loc_from_full_to_swa(first[:2]) == [0, 0]
    assert matched(cache, [1, 2]) == 0
    again = put(cache, alloc, [1, 2])  # recomputes tokens 1, 2
    assert matched(cache, [1, 2]) == 2
    got = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2]))).device_indices
    assert got == first[:2]  # the tree kept its (locked) full slots ...
    peers = alloc.translate_loc_from_full_to_swa(first)
    assert 0 not in peers and len(set(peers)) == 3  # ... with my SWA KV adopted
    assert not any(alloc.full_attn_allocator.allocated(s) for s in again)  # ... freed mine
    cache.unlock(lock)
    cache.sanity_check()


def test_misuse_raises_typed_errors_and_changes_nothing() -> None:
    cache, alloc = make(window=2)
    put(cache, alloc, [1, 2, 3])
    node = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3]))).last_device_node
    cache.evict(EvictParams(0, 3))
    before = (copy.deepcopy(alloc.full_to_swa_index_mapping), alloc.swa_available_size(),
              cache.full_protected_size())
    with pytest.raises(TombstonedWindowError):
        cache.inc_lock_ref(node)
    with pytest.raises(LockUnderflowError):
        cache.dec_lock_ref(node)
    with pytest.raises(DoubleFreeError):
        alloc.free_swa([node.value[0]])
    with pytest.raises(InvalidArgumentError):
        cache.evict(EvictParams(0, -1))
    assert before == (alloc.full_to_swa_index_mapping, alloc.swa_available_size(),
                      cache.full_protected_size())
    for error in (TombstonedWindowError, LockUnderflowError, DoubleFreeError):
        assert issubclass(error, SGLangCacheError)


def test_the_swa_allocator_refuses_when_either_pool_is_short() -> None:
    alloc = SWATokenToKVPoolAllocator(8, 2, 1)
    assert alloc.alloc(3) is None and alloc.available_size() == 2
    got = alloc.alloc(2)
    assert got is not None and sorted(alloc.translate_loc_from_full_to_swa(got)) == [1, 2]
    alloc.free(got)
    assert (alloc.full_available_size(), alloc.swa_available_size()) == (8, 2)


def judge(window: int = 2, pages: int = 8, swa_pages: int = 8) -> SWATreeJudge:
    target = tree_target(BUNDLED_SWA_SPEC)
    return SWATreeJudge(target.create, TreeConfig(pages, 1, window, swa_pages))


def test_the_judge_follows_windows_tombstones_and_recovery() -> None:
    j = judge(window=2, pages=8, swa_pages=4)
    j.step(Arrive((1, 2, 3, 4)))
    j.step(Finish(0, hold=True))  # holds [1..4]: window 3, 4
    j.step(Evict(0, 8))  # tombstones 1, 2 only
    assert j.model.swa_sizes() == (0, 2)
    assert j.step(Match((1, 2))) == 0
    assert j.step(Match((1, 2, 3, 4))) == 4
    j.step(Arrive((1, 2)))  # recomputes 1, 2 (the SWA pool has 2 free)
    j.step(Finish(1))
    assert j.step(Match((1, 2))) == 2
    j.step(Unlock(0))
    assert j.model.swa_sizes() == (4, 0)


class LosesWindow(SWARadixCache):
    """A broken cache: SWA eviction ignores the locks' windows."""

    def evict(self, params: EvictParams):  # type: ignore[no-untyped-def]
        for x in self._nodes():
            x.swa_lock = [0] * len(x.key)
        return super().evict(params)


def test_the_judge_catches_a_dropped_window() -> None:
    j = judge(window=2)
    j.step(Arrive((1, 2, 3)))
    j.step(Finish(0, hold=True))
    tree = j.tree
    tree.cache.__class__ = LosesWindow
    with pytest.raises(Violation) as caught:
        j.step(Evict(0, 8))
    assert caught.value.family.value in {"LOCK", "SWA"}


def test_release_swa_unprotects_the_window_and_keeps_the_full_lock() -> None:
    cache, alloc = make(window=2)
    put(cache, alloc, [1, 2, 3])
    node = cache.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3]))).last_device_node
    lock = cache.lock(node)
    cache.release_swa(lock)
    with pytest.raises(LockUnderflowError):  # once only: a second release changes nothing
        cache.release_swa(lock)
    assert (cache.swa_evictable_size(), cache.swa_protected_size()) == (3, 0)
    assert cache.evict(EvictParams(0, 3)).swa_num_tokens_evicted == 3
    assert cache.full_protected_size() == 3 and matched(cache, [1, 2, 3]) == 0
    cache.unlock(lock)  # the full lock only
    assert cache.full_evictable_size() == 3
    cache.sanity_check()


def test_the_judge_follows_a_released_window() -> None:
    j = judge(window=1, pages=8, swa_pages=4)
    j.step(Arrive((1, 2)))
    j.step(Finish(0, hold=True))
    j.step(ReleaseWindow(0))
    j.step(Evict(0, 8))
    assert j.model.swa_sizes() == (0, 0) and j.step(Match((1, 2))) == 0
    j.step(Unlock(0))
