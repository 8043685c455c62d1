"""Where upstream SGLang 0.5.23 departs from the contract, pinned next to the reference's answer.

Each test drives upstream into a misuse a scheduler bug can make, asserts what upstream does
(so a fix upstream shows up here as a failure to update), and asserts the bundled reference
refuses the same misuse with a typed error and no state change.
"""

from __future__ import annotations

from typing import Any

import pytest

from prefixcache.sglang.errors import DoubleFreeError, LockUnderflowError
from prefixcache.sglang.srt.mem_cache.allocator import (
    PagedTokenToKVPoolAllocator,
    TokenToKVPoolAllocator,
)
from prefixcache.sglang.srt.mem_cache.base_prefix_cache import (
    EvictParams,
    InsertParams,
    MatchPrefixParams,
)
from prefixcache.sglang.srt.mem_cache.cache_init_params import CacheInitParams
from prefixcache.sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey
from properties.families.sglang import upstream as sgl
from properties.families.sglang.driver import UpstreamTree

pytestmark = pytest.mark.skipif(sgl.unavailable_reason() is not None,
                                reason=str(sgl.unavailable_reason()))


@pytest.fixture(scope="module")
def mods() -> sgl.SGLangModules:
    return sgl.load_sglang()


@pytest.mark.parametrize("page_size", [1, 4])
def test_upstream_allocator_accepts_a_double_free(mods: sgl.SGLangModules,
                                                  page_size: int) -> None:
    import torch

    upstream = mods.new_allocator(8 * page_size, page_size)
    got = upstream.alloc(2 * page_size)
    upstream.free(got)
    upstream.free(got)  # accepted
    assert upstream.available_size() == 10 * page_size > 8 * page_size  # above capacity
    upstream.free(torch.tensor([1000 * page_size]))  # a slot that is not in the pool: accepted
    handed = upstream.alloc(upstream.available_size() // page_size * page_size).tolist()
    assert len(handed) != len(set(handed))  # the same slot handed out twice

    ours = (TokenToKVPoolAllocator(8) if page_size == 1
            else PagedTokenToKVPoolAllocator(8 * page_size, page_size))
    mine = ours.alloc(2 * page_size)
    assert mine is not None
    ours.free(mine)
    with pytest.raises(DoubleFreeError):
        ours.free(mine)
    assert ours.available_size() == 8 * page_size


def _locked_leaf(tree: UpstreamTree) -> tuple[Any, Any]:
    slots = tree.alloc(4)
    assert slots is not None
    tree.insert([1, 2, 3, 4], slots)
    _, node, _ = tree.match([1, 2, 3, 4])
    receipt = tree.lock(node)
    tree.unlock(receipt)
    return node, receipt


def test_classic_double_unlock_drives_the_count_negative_then_evicts_a_locked_node(
        mods: sgl.SGLangModules) -> None:
    tree = UpstreamTree(mods, "classic", 32)
    node, receipt = _locked_leaf(tree)
    tree.unlock(receipt)  # accepted
    assert node.lock_ref == -1
    tree.cache.inc_lock_ref(node)  # a new holder locks it ...
    assert node.lock_ref == 0 and tree.sizes() == (4, 0, 4)
    assert tree.evict(10)[0] == 4  # ... and its KV is evicted under it

    ours = RadixCache(CacheInitParams(False, None, TokenToKVPoolAllocator(32), 1))
    slots = ours.token_to_kv_pool_allocator.alloc(4)  # type: ignore[union-attr]
    ours.insert(InsertParams(RadixKey([1, 2, 3, 4]), slots))
    lock = ours.lock(ours.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3, 4])))
                     .last_device_node)
    ours.unlock(lock)
    with pytest.raises(LockUnderflowError):
        ours.unlock(lock)
    assert ours.evictable_size() == 4


def test_unified_double_unlock_python_asserts_rust_poisons(mods: sgl.SGLangModules) -> None:
    python = UpstreamTree(mods, "unified-python", 32)
    _, receipt = _locked_leaf(python)
    with pytest.raises(AssertionError):  # a bare assert: gone under python -O
        python.unlock(receipt)
    assert python.sizes() == (4, 0, 4)
    if not mods.rust_core:
        pytest.skip(f"the Rust tree core did not load: {mods.rust_error}")
    rust = UpstreamTree(mods, "unified-rust", 32)
    _, receipt = _locked_leaf(rust)
    with pytest.raises(RuntimeError, match="lock_ref=0"):
        rust.unlock(receipt)
    with pytest.raises(RuntimeError, match="poisoned"):  # the cache is dead from here on
        rust.sizes()


@pytest.mark.parametrize("kind", ["unified-python", "unified-rust"])
def test_unified_insert_frees_the_trees_own_slots_when_prev_prefix_len_is_short(
        mods: sgl.SGLangModules, kind: str) -> None:
    import torch

    if kind == "unified-rust" and not mods.rust_core:
        pytest.skip(f"the Rust tree core did not load: {mods.rust_error}")
    tree = UpstreamTree(mods, kind, 32)
    slots = tree.alloc(4)
    assert slots is not None
    tree.insert([1, 2, 3, 4], slots)
    _, _, matched = tree.match([1, 2, 3, 4])
    params = mods.base.InsertParams(key=tree.key([1, 2, 3, 4], None),
                                    value=torch.tensor(matched), prev_prefix_len=0)
    tree.cache.insert(params)
    assert set(matched) <= set(tree.free_slots())  # free, and still the tree's KV
    assert tree.match([1, 2, 3, 4])[0] == 4

    ours = RadixCache(CacheInitParams(False, None, TokenToKVPoolAllocator(32), 1))
    alloc = ours.token_to_kv_pool_allocator
    assert alloc is not None
    mine = alloc.alloc(4)
    ours.insert(InsertParams(RadixKey([1, 2, 3, 4]), mine))
    m = ours.match_prefix(MatchPrefixParams(RadixKey([1, 2, 3, 4])))
    ours.insert(InsertParams(RadixKey([1, 2, 3, 4]), m.device_indices, prev_prefix_len=0))
    assert alloc.available_size() == 28  # identical slots are not duplicates: nothing freed
    ours.evict(EvictParams(4))
    assert alloc.available_size() == 32
