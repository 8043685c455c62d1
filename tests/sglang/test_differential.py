"""The bundled reference against upstream SGLang, op for op (Hypothesis, derandomized).

One generated list of scheduler operations (a request's prefill: match, allocate the rest,
evicting first if short, insert with the match as ``prev_prefix_len``, optionally hold a lock
on the result; release a held lock; evict; a bare match) runs on the bundled ``RadixCache`` and
on upstream's classic ``RadixCache`` and ``UnifiedRadixCache`` (Python and Rust tree cores),
each over its own allocator of the same size and page size. After every step they must agree
on: matched lengths and slots, insert's ``prefix_len``, ``evictable``/``protected``/``total``
sizes, the allocator's free count, and which slots eviction freed. The allowed difference: none
observed so far; LRU ties cannot arise (every operation stamps a new time, ties break by node
age in all four). Upstream's own invariants (no slot free twice, ``available_size`` within
capacity, ``evictable + protected == total``) are asserted too: a failure there is an upstream
deviation, not the reference's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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

VERSION = sgl.DEFAULT_VERSION
needs_wheel = pytest.mark.skipif(sgl.unavailable_reason(VERSION) is not None,
                                 reason=str(sgl.unavailable_reason(VERSION)))
needs_classic_wheel = pytest.mark.skipif(
    sgl.unavailable_reason(sgl.CLASSIC_VERSION) is not None,
    reason=str(sgl.unavailable_reason(sgl.CLASSIC_VERSION)))

POOL = 48
SETTINGS = settings(max_examples=40, derandomize=True, database=None, deadline=None)


class BundledTree:
    """The bundled reference behind the driver's interface."""

    def __init__(self, size: int, page_size: int) -> None:
        self.page_size = page_size
        self.allocator: TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator = (
            TokenToKVPoolAllocator(size) if page_size == 1
            else PagedTokenToKVPoolAllocator(size, page_size))
        self.cache = RadixCache(CacheInitParams(False, None, self.allocator, page_size))

    def alloc(self, n: int) -> list[int] | None:
        return self.allocator.alloc(n)

    def available_size(self) -> int:
        return self.allocator.available_size()

    def match(self, tokens: Sequence[int], extra_key: str | None = None
              ) -> tuple[int, Any, list[int]]:
        m = self.cache.match_prefix(MatchPrefixParams(RadixKey(list(tokens), extra_key)))
        return m.device_prefix_len, m.last_device_node, m.device_indices

    def insert(self, tokens: Sequence[int], slots: Sequence[int], extra_key: str | None = None,
               prev_prefix_len: int = 0) -> int:
        return self.cache.insert(InsertParams(RadixKey(list(tokens), extra_key), list(slots),
                                              prev_prefix_len=prev_prefix_len)).prefix_len

    def lock(self, node: Any) -> Any:
        return self.cache.lock(node)

    def unlock(self, receipt: Any) -> None:
        self.cache.unlock(receipt)

    def evict(self, num_tokens: int) -> tuple[int, Counter[int]]:
        res = self.cache.evict(EvictParams(num_tokens))
        return res.num_tokens_evicted, Counter(res.evicted_indices)

    def sizes(self) -> tuple[int, int, int]:
        c = self.cache
        return c.evictable_size(), c.protected_size(), c.total_size()


tokens_st = st.lists(st.integers(0, 2), min_size=0, max_size=10)
namespace_st = st.sampled_from([None, None, "lora-a"])
ops_st = st.lists(st.one_of(
    st.tuples(st.just("put"), tokens_st, namespace_st, st.booleans()),
    st.tuples(st.just("release"), st.integers(0, 7)),
    st.tuples(st.just("evict"), st.integers(1, 12)),
    st.tuples(st.just("match"), tokens_st, namespace_st),
), max_size=24)


def run(trees: dict[str, Any], ops: list[tuple[Any, ...]]) -> None:
    """Drive every tree through ``ops`` in lockstep, asserting agreement after each step."""
    held: dict[str, list[Any]] = {name: [] for name in trees}
    for step, op in enumerate(ops):
        seen: dict[str, object] = {}
        for name, tree in trees.items():
            seen[name] = apply(tree, op, held[name])
            ev, prot, total = tree.sizes()
            assert ev + prot == total, f"{name}: sizes {ev}+{prot} != {total} at {step}"
            assert tree.available_size() + total <= POOL, f"{name}: {tree.available_size()} " \
                f"free + {total} cached > {POOL} slots at step {step}"
            if isinstance(tree, UpstreamTree):
                dups = [s for s, n in tree.free_slots().items() if n > 1]
                assert not dups, f"{name}: slots {dups} free twice at step {step}"
        first = next(iter(seen.values()))
        for name, got in seen.items():
            assert got == first, f"step {step} {op}: {name} saw {got}, bundled {first}"


def apply(tree: Any, op: tuple[Any, ...], held: list[Any]) -> object:
    kind = op[0]
    ps = tree.page_size
    if kind == "put":
        _, tokens, ns, hold = op
        matched, _, slots = tree.match(tokens, ns)
        need = len(tokens) // ps * ps - matched
        evicted = None
        if tree.available_size() < need:
            evicted = tree.evict(need - tree.available_size())
        fresh = tree.alloc(need)
        if fresh is None:
            return ("put", matched, slots, evicted, None, tree.sizes(), tree.available_size())
        prefix = tree.insert(tokens, slots + fresh, ns, prev_prefix_len=matched)
        if hold:
            _, node, _ = tree.match(tokens, ns)
            held.append(tree.lock(node))
        return ("put", matched, slots, evicted, prefix, tree.sizes(), tree.available_size())
    if kind == "release":
        if held:
            tree.unlock(held.pop(op[1] % len(held)))
        return ("release", tree.sizes())
    if kind == "evict":
        return ("evict", tree.evict(op[1]), tree.sizes(), tree.available_size())
    _, tokens, ns = op
    matched, _, slots = tree.match(tokens, ns)
    return ("match", matched, slots, tree.sizes())


@pytest.fixture(scope="module")
def mods() -> sgl.SGLangModules:
    return sgl.load_sglang(version=VERSION)


@needs_wheel
@pytest.mark.parametrize("page_size", [1, 2])
@pytest.mark.parametrize("kind", ["classic", "unified-python", "unified-rust"])
def test_bundled_agrees_with_upstream(mods: sgl.SGLangModules, kind: str,
                                      page_size: int) -> None:
    if kind == "unified-rust" and not mods.rust_core:
        pytest.skip(f"the Rust tree core did not load: {mods.rust_error}")

    @SETTINGS
    @given(ops=ops_st)
    def check(ops: list[tuple[Any, ...]]) -> None:
        run({"bundled": BundledTree(POOL, page_size),
             kind: UpstreamTree(mods, kind, POOL, page_size)}, ops)

    check()


@needs_classic_wheel
def test_bundled_agrees_with_the_last_classic_default_release() -> None:
    old = sgl.load_sglang(version=sgl.CLASSIC_VERSION)

    @settings(max_examples=25, derandomize=True, database=None, deadline=None)
    @given(ops=ops_st)
    def check(ops: list[tuple[Any, ...]]) -> None:
        run({"bundled": BundledTree(POOL, 1),
             "classic-0.5.18": UpstreamTree(old, "classic", POOL, 1)}, ops)

    check()
