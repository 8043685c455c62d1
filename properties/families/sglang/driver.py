"""Drive one of upstream SGLang's trees the way a scheduler does, in plain ints.

:class:`UpstreamTree` wraps a loaded release's classic ``RadixCache`` or ``UnifiedRadixCache``
(Python or Rust tree core) over its own ``TokenToKVPoolAllocator`` /
``PagedTokenToKVPoolAllocator`` (need_sort off), and speaks lists of ints: the suite's
differential tests and the benchmark call the same operations on the bundled reference.

Ownership as the scheduler keeps it: a request inserts slots for its page-aligned tokens; the
classic tree leaves the duplicates to the caller, who frees ``value[prev_prefix_len:prefix_len]``
(upstream's ``_insert_cache``), while ``UnifiedRadixCache`` frees them itself. The driver does
the caller's part for the classic tree only, so both end in the same ownership.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Sequence
from typing import Any

from properties.families.sglang.request_driver import ROWS, RequestCalls, pool_classes
from properties.families.sglang.upstream import SGLangModules, read_match

__all__ = ["KINDS", "UpstreamTree"]

KINDS = ("classic", "unified-python", "unified-rust")


class UpstreamTree(RequestCalls):
    """``kind``: "classic", "unified-python" or "unified-rust"; ``size`` slots (1..size).
    ``requests``: build the tree with the wheel's own request-to-token pool, for the request
    API (:class:`RequestCalls`); the attribute says whether it runs on this tree."""

    def __init__(self, mods: SGLangModules, kind: str, size: int, page_size: int = 1,
                 requests: bool = False) -> None:
        import torch

        self._torch = torch
        self.mods = mods
        self.kind = kind
        self.page_size = page_size
        self.allocator = mods.new_allocator(size, page_size)
        # alloc_extend / alloc_decode run here only through a CPU path (0.5.21 on:
        # alloc_extend_naive when triton is absent; 0.5.18 launches its triton kernels).
        module = mods.modules.get(type(self.allocator).__module__)
        self.extends = (page_size > 1 and hasattr(module, "alloc_extend_naive")
                        and not getattr(self.allocator, "use_triton_kernels", True))
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; one of {KINDS}")
        common = mods.modules.get("sglang.srt.mem_cache.common")
        self._release = getattr(common, "release_kv_cache", None)  # type: ignore[assignment]
        radix = mods.radix_cache.RadixCache
        # 0.5.18's classic tree: cache_unfinished_req / cache_finished_req (detected).
        self.legacy = (kind == "classic" and hasattr(radix, "cache_unfinished_req")
                       and not hasattr(radix, "checkpoint"))
        self.requests = (requests and self._release is not None
                         and (self.legacy or hasattr(radix, "checkpoint")
                              or kind != "classic"))
        self.pool = None
        if self.requests:
            pool_cls, self._kv_cls = pool_classes(mods.origin)
            self.pool = pool_cls(ROWS, size + 2, "cpu", False)
            self.requests = self._kv_cls is not None
        if kind == "classic":
            self.cache = mods.new_radix_cache(self.allocator, page_size, self.pool)
        else:
            self.cache = mods.new_unified(self.allocator, page_size, core=kind.split("-")[1],
                                          req_to_token_pool=self.pool)
        base = mods.base
        self._key = mods.radix_cache.RadixKey
        self._match_params = base.MatchPrefixParams
        self._insert_params = base.InsertParams
        self._evict_params = base.EvictParams
        self._unified = kind != "classic"

    # -- allocator --------------------------------------------------------- #

    def alloc(self, n: int) -> list[int] | None:
        got = self.allocator.alloc(n)
        return None if got is None else [int(x) for x in got.tolist()]

    def free(self, slots: Sequence[int]) -> None:
        if slots:
            self.allocator.free(self._torch.tensor(list(slots), dtype=self._torch.int64))

    def free_segment(self, slots: Sequence[int], start_pos: int = 0) -> None:
        """``free_segment(slots, start_pos=...)``: one request's KV row segment."""
        if slots:
            self.allocator.free_segment(
                self._torch.tensor(list(slots), dtype=self._torch.int64), start_pos=start_pos)

    def free_group(self, parts: Sequence[Sequence[int]]) -> None:
        """``free_group_begin()``, ``free`` of each part, ``free_group_end()``."""
        self.allocator.free_group_begin()
        for part in parts:
            self.free(part)
        self.allocator.free_group_end()

    def alloc_extend(self, prefix_len: int, seq_len: int, last_loc: int) -> list[int] | None:
        """The paged allocator's ``alloc_extend`` for one request (CPU tensors)."""
        t = self._torch
        prefix, seq = t.tensor([prefix_len]), t.tensor([seq_len])
        got = self.allocator.alloc_extend(prefix, prefix, seq, seq, t.tensor([last_loc]),
                                          seq_len - prefix_len)
        return None if got is None else [int(x) for x in got.tolist()]

    def alloc_decode(self, seq_len: int, last_loc: int) -> list[int] | None:
        """The paged allocator's ``alloc_decode`` for one request (CPU tensors)."""
        t = self._torch
        seq = t.tensor([seq_len])
        got = self.allocator.alloc_decode(seq, seq, t.tensor([last_loc]))
        return None if got is None else [int(x) for x in got.tolist()]

    def alloc_extend_rows(self, rows: Sequence[tuple[int, int, int]]) -> list[int] | None:
        """One ``alloc_extend`` for several requests (CPU tensors): ``(prefix_len, seq_len,
        last_loc)`` each, their new slots in request order."""
        t = self._torch
        prefix, seq, last = (t.tensor([row[i] for row in rows]) for i in range(3))
        got = self.allocator.alloc_extend(prefix, prefix, seq, seq, last,
                                          sum(s - p for p, s, _ in rows))
        return None if got is None else [int(x) for x in got.tolist()]

    def alloc_decode_rows(self, rows: Sequence[tuple[int, int]]) -> list[int] | None:
        """One ``alloc_decode`` for several requests (CPU tensors): ``(seq_len, last_loc)``
        each."""
        t = self._torch
        seq, last = t.tensor([row[0] for row in rows]), t.tensor([row[1] for row in rows])
        got = self.allocator.alloc_decode(seq, seq, last)
        return None if got is None else [int(x) for x in got.tolist()]

    def available_size(self) -> int:
        return int(self.allocator.available_size())

    def free_slots(self) -> Counter[int]:
        """The allocator's free slots as a multiset (a slot twice means a double free)."""
        pages = self.allocator.get_all_free_pages() if hasattr(
            self.allocator, "get_all_free_pages") else self.allocator.free_pages
        ps = self.page_size
        out: Counter[int] = Counter()
        for page in pages.tolist():
            for i in range(ps):
                out[int(page) * ps + i if ps > 1 else int(page)] += 1
        return out

    # -- tree -------------------------------------------------------------- #

    def key(self, tokens: Sequence[int], extra_key: str | None) -> Any:
        return self._key(array("q", tokens), extra_key)

    def match(self, tokens: Sequence[int], extra_key: str | None = None
              ) -> tuple[int, Any, list[int]]:
        """(matched length, node handle, the matched tokens' slots)."""
        result = self.cache.match_prefix(self._match_params(key=self.key(tokens, extra_key)))
        return read_match(result, self.cache)

    def insert(self, tokens: Sequence[int], slots: Sequence[int], extra_key: str | None = None,
               prev_prefix_len: int = 0) -> int:
        """Insert; returns ``prefix_len``. Duplicates end freed whichever tree this is."""
        aligned = len(tokens) // self.page_size * self.page_size
        value = self._torch.tensor(list(slots[:aligned]), dtype=self._torch.int64)
        params = self._insert_params(key=self.key(tokens[:aligned], extra_key), value=value,
                                     prev_prefix_len=prev_prefix_len)
        prefix_len = int(self.cache.insert(params).prefix_len)
        if not self._unified and prefix_len > prev_prefix_len:
            self.free(list(slots[prev_prefix_len:prefix_len]))
        return prefix_len

    def lock(self, node: Any) -> Any:
        if hasattr(self.cache, "lock"):
            return self.cache.lock(node)
        self.cache.inc_lock_ref(node)
        return node

    def unlock(self, receipt: Any) -> None:
        if hasattr(self.cache, "unlock"):
            self.cache.unlock(receipt)
        else:
            self.cache.dec_lock_ref(receipt)

    def lock_count(self, node: Any) -> int | None:
        """The node's lock count, where the tree keeps one on its node (None: not readable
        here)."""
        count = getattr(node, "lock_ref", None)
        return None if count is None else int(count)

    def evict(self, num_tokens: int) -> tuple[int, Counter[int]]:
        """(tokens the tree says it evicted, the slots that became free)."""
        before = self.free_slots()
        result = self.cache.evict(self._evict_params(num_tokens=num_tokens))
        after = self.free_slots()
        return int(result.num_tokens_evicted), after - before

    def sizes(self) -> tuple[int, int, int]:
        """(evictable, protected, total tokens)."""
        total = self.cache.total_size()
        if isinstance(total, tuple):
            total = total[0]
        return (int(self.cache.evictable_size()), int(self.cache.protected_size()),
                int(total))
