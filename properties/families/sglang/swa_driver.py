"""Drive one of upstream SGLang's FULL + SWA trees the way a scheduler does, in plain ints.

:class:`UpstreamSWATree` wraps 0.5.23's ``UnifiedRadixCache`` with components ``(FULL, SWA)``
(Python or Rust tree core) or 0.5.18's ``SWARadixCache``, over upstream's
``SWATokenToKVPoolAllocator(size, size_swa, page_size=1, ...)`` with need_sort off. Both trees
free insert's duplicates themselves (full slot and SWA peer, through the allocator's ``free``).

One stand-in: the allocator requires a ``BaseSWAKVPool`` (the GPU KV memory) and calls only its
``register_mapping`` (keep the full->SWA mapping tensor) and ``translate_loc_from_full_to_swa``
(index it), which :class:`MappingOnlyPool` does as upstream's ``SWAKVPool`` does; no tree or
allocator call reads KV memory, so no KV buffers can change what is observed.

Tree calls that may import lazily (match, insert, evict) run inside
:meth:`~properties.families.sglang.upstream.SGLangModules.activated`.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Sequence
from typing import Any

from properties.families.sglang.upstream import SGLangModules, UpstreamCoreUnavailable, read_match

__all__ = ["SWA_KINDS", "UpstreamSWATree"]

SWA_KINDS = ("swa-unified-python", "swa-unified-rust", "swa-classic")


def _pool(mods: SGLangModules) -> Any:
    base = mods.module("srt.mem_cache.base_swa_memory_pool").BaseSWAKVPool

    class MappingOnlyPool(base):  # type: ignore[misc,valid-type]
        """See the module docstring."""

        full_kv_pool = None
        swa_kv_pool = None

        def __new__(cls) -> Any:  # the KVCache base is a placeholder: no GPU buffers
            return object.__new__(cls)

        def __init__(self) -> None:
            self.full_to_swa_index_mapping = None

        def register_mapping(self, mapping: Any) -> None:
            self.full_to_swa_index_mapping = mapping

        def translate_loc_from_full_to_swa(self, kv_indices: Any) -> Any:
            return self.full_to_swa_index_mapping[kv_indices]  # type: ignore[index]

        def get_state_buf_infos(self) -> tuple[list[int], list[int], list[int]]:
            return [], [], []

    return MappingOnlyPool()


class UpstreamSWATree:
    """``kind``: one of :data:`SWA_KINDS`; ``size`` full slots, ``swa_size`` SWA slots (None:
    ``size``), sliding window ``window``; page size 1."""

    def __init__(self, mods: SGLangModules, kind: str, size: int, page_size: int = 1,
                 swa_size: int | None = None, window: int = 2) -> None:
        import torch

        if kind not in SWA_KINDS:
            raise ValueError(f"unknown kind {kind!r}; one of {SWA_KINDS}")
        if page_size != 1:
            raise ValueError("the FULL + SWA trees are driven at page size 1")
        self._torch = torch
        self.mods = mods
        self.kind = kind
        self.page_size = 1
        self.extends = False
        with mods.activated():
            alloc_cls = mods.module("srt.mem_cache.allocator.swa").SWATokenToKVPoolAllocator
            self.allocator = alloc_cls(size, size if swa_size is None else swa_size, 1,
                                       torch.int64, "cpu", _pool(mods), False)
            params = mods.module("srt.mem_cache.cache_init_params").CacheInitParams
            common = {"disable": False, "req_to_token_pool": None,
                      "token_to_kv_pool_allocator": self.allocator, "page_size": 1,
                      "sliding_window_size": window}
            if kind == "swa-classic":
                cls = mods.module("srt.mem_cache.swa_radix_cache").SWARadixCache
                self.cache = cls(params(**common))
            else:
                component = mods.module(
                    "srt.mem_cache.unified_cache.component_type").ComponentType
                core = kind.rsplit("-", 1)[1]
                unified = mods.module("srt.mem_cache.unified_radix_cache").UnifiedRadixCache
                self.cache = unified(params(**common, tree_components=(
                    component.FULL, component.SWA), tree_core_backend=core))
                found = type(getattr(self.cache, "tree_core", None)).__name__
                if core == "rust" and "Rust" not in found:
                    raise UpstreamCoreUnavailable(f"{mods.version}: asked for the Rust core "
                                                  f"with SWA, got {found}")
        base = mods.base
        self._key = mods.radix_cache.RadixKey
        self._match_params = base.MatchPrefixParams
        self._insert_params = base.InsertParams
        self._evict_params = base.EvictParams

    # -- allocator --------------------------------------------------------- #

    def alloc(self, n: int) -> list[int] | None:
        got = self.allocator.alloc(n)
        return None if got is None else [int(x) for x in got.tolist()]

    def swa_of(self, slots: Sequence[int]) -> list[int]:
        if not slots:
            return []
        index = self._torch.tensor(list(slots), dtype=self._torch.int64)
        return [int(x) for x in self.allocator.full_to_swa_index_mapping[index].tolist()]

    def _free_of(self, allocator: Any) -> Counter[int]:
        pages = allocator.get_all_free_pages() if hasattr(
            allocator, "get_all_free_pages") else allocator.free_pages
        return Counter(int(p) for p in pages.tolist())

    def free_slots(self) -> Counter[int]:
        return self._free_of(self.allocator.full_attn_allocator)

    def swa_free_slots(self) -> Counter[int]:
        return self._free_of(self.allocator.swa_attn_allocator)

    def available_size(self) -> int:
        return int(self.allocator.full_available_size())

    def swa_available_size(self) -> int:
        return int(self.allocator.swa_available_size())

    # -- tree -------------------------------------------------------------- #

    def match(self, tokens: Sequence[int], extra_key: str | None = None
              ) -> tuple[int, Any, list[int]]:
        key = self._key(array("q", tokens), extra_key)
        with self.mods.activated():
            result = self.cache.match_prefix(self._match_params(key=key))
        return read_match(result, self.cache)

    def insert(self, tokens: Sequence[int], slots: Sequence[int], extra_key: str | None = None,
               prev_prefix_len: int = 0) -> int:
        value = self._torch.tensor(list(slots[:len(tokens)]), dtype=self._torch.int64)
        params = self._insert_params(key=self._key(array("q", tokens), extra_key), value=value,
                                     prev_prefix_len=prev_prefix_len)
        with self.mods.activated():  # the SWA component imports lazily (tombstone recovery)
            return int(self.cache.insert(params).prefix_len)

    def lock(self, node: Any) -> Any:
        """A receipt: upstream's ``TreeLock`` (0.5.23), else [node, dec params, whether the
        SWA part was released] (0.5.18's ``inc_lock_ref``)."""
        if hasattr(self.cache, "lock"):
            return self.cache.lock(node)
        return [node, self.cache.inc_lock_ref(node).to_dec_params(), False]

    def unlock(self, receipt: Any) -> None:
        if hasattr(self.cache, "unlock"):
            self.cache.unlock(receipt)
        else:
            node, params, released = receipt
            self.cache.dec_lock_ref(node, params, skip_swa=released)

    def release_swa(self, receipt: Any) -> None:
        """The lock's SWA part only, early (0.5.23 ``release_swa``, 0.5.18
        ``dec_swa_lock_only``), as a request decoding past the window does."""
        with self.mods.activated():
            if hasattr(self.cache, "release_swa"):
                self.cache.release_swa(receipt)
            elif not receipt[2]:
                self.cache.dec_swa_lock_only(receipt[0], receipt[1].swa_uuid_for_lock)
                receipt[2] = True

    def lock_count(self, node: Any) -> int | None:
        return None

    def evict(self, num_tokens: int, swa_num_tokens: int = 0
              ) -> tuple[int, int, Counter[int], Counter[int]]:
        full, swa = self.free_slots(), self.swa_free_slots()
        with self.mods.activated():
            result = self.cache.evict(self._evict_params(num_tokens=num_tokens,
                                                         swa_num_tokens=swa_num_tokens))
        return (int(result.num_tokens_evicted), int(result.swa_num_tokens_evicted),
                self.free_slots() - full, self.swa_free_slots() - swa)

    def sizes(self) -> tuple[int, int, int]:
        evictable = int(self.cache.full_evictable_size())
        protected = int(self.cache.full_protected_size())
        total = self.cache.total_size()
        return evictable, protected, int(total[0] if isinstance(total, tuple) else total)

    def swa_sizes(self) -> tuple[int, int]:
        return int(self.cache.swa_evictable_size()), int(self.cache.swa_protected_size())
