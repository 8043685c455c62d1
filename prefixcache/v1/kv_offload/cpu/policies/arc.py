"""ARC, adaptive replacement (upstream ``cpu/policies/arc.py``, 0.34.0 semantics).

T1 holds chunks used by one request, T2 chunks reused by a later request; B1/B2 remember keys
recently evicted from T1/T2 (each bounded by the capacity). ``target_t1_size`` (ARC's ``p``)
grows on a B1 hit by ``max(1, |B2|/|B1|)`` and shrinks on a B2 hit by ``max(1, |B1|/|B2|)``,
within ``[0, capacity]``; a request observes each ghost hit once, when it offers the key for
storage. Eviction takes T1's least recent evictable chunk while ``|T1| >= int(p)`` (counting
the victims already chosen), else T2's; when the preferred list has no evictable, unprotected
chunk it falls back to the other, so a store fails only when neither has one. New chunks
enter T1 (and leave the ghost lists); on request finish a reused chunk moves from T1 to T2,
or to T2's recent end, and a chunk the request only inserted keeps its list and becomes its
most recent. All operations are O(1) per key but for the eviction walk past pinned chunks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence

from prefixcache.v1.kv_offload.base import OffloadKey, ReqContext
from prefixcache.v1.kv_offload.cpu.policies.base import (
    CachePolicy,
    ChunkStatus,
    order_request_keys,
)

__all__ = ["ARCCachePolicy"]


class ARCCachePolicy(CachePolicy):
    """Adaptive replacement cache over the CPU chunks (see the module docstring)."""

    def __init__(self, cache_capacity: int) -> None:
        super().__init__(cache_capacity)
        self.target_t1_size: float = 0.0
        self.t1: OrderedDict[OffloadKey, ChunkStatus] = OrderedDict()
        self.t2: OrderedDict[OffloadKey, ChunkStatus] = OrderedDict()
        self.b1: OrderedDict[OffloadKey, None] = OrderedDict()
        self.b2: OrderedDict[OffloadKey, None] = OrderedDict()

    def insert(self, key: OffloadKey, chunk: ChunkStatus, req_context: ReqContext) -> None:
        self.chunks[key] = chunk
        self.t1[key] = chunk
        self.b1.pop(key, None)
        self.b2.pop(key, None)

    def insert_all(self, keys: Sequence[OffloadKey], chunks: Sequence[ChunkStatus],
                   req_context: ReqContext) -> None:
        self.chunks.update(zip(keys, chunks, strict=True))
        self.t1.update(zip(keys, chunks, strict=True))  # new keys: appended in order
        for ghost in (self.b1, self.b2):
            if ghost:
                for key in keys:
                    ghost.pop(key, None)

    def remove(self, key: OffloadKey) -> None:
        del self.chunks[key]
        if self.t1.pop(key, None) is None:
            del self.t2[key]

    def _ghost_hit(self, key: OffloadKey) -> None:
        if key in self.b1:
            delta = max(1, len(self.b2) / len(self.b1))
            self.target_t1_size = min(self.target_t1_size + delta, self.cache_capacity)
            self.b1.move_to_end(key)
        elif key in self.b2:
            delta = max(1, len(self.b1) / len(self.b2))
            self.target_t1_size = max(self.target_t1_size - delta, 0)
            self.b2.move_to_end(key)

    def on_store_miss(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        b1, b2 = self.b1, self.b2
        if not b1 and not b2:
            return
        for key in reversed(list(keys)):
            if key in b1 or key in b2:
                self._ghost_hit(key)

    def on_request_finished(self, key_groups: Sequence[Sequence[OffloadKey]],
                            insertion_only_keys: set[OffloadKey],
                            reused_keys: set[OffloadKey], req_context: ReqContext) -> None:
        t1, t2 = self.t1, self.t2
        keys = (key_groups[0] if len(key_groups) == 1  # one group arrives ordered already
                else order_request_keys(key_groups, req_context))
        for key in reversed(keys):
            if key in insertion_only_keys:
                if key in t1:
                    t1.move_to_end(key)
                elif key in t2:
                    t2.move_to_end(key)
            elif key in reused_keys:
                if key in t1:
                    t2[key] = t1.pop(key)
                elif key in t2:
                    t2.move_to_end(key)

    def clear(self) -> None:
        self.chunks.clear()
        self.t1.clear()
        self.t2.clear()
        self.b1.clear()
        self.b2.clear()
        self.target_t1_size = 0.0

    def evict(self, n: int, protected: set[OffloadKey]
              ) -> list[tuple[OffloadKey, ChunkStatus]] | None:
        if n <= 0:
            return []
        # Pick by pick, T1 is preferred while |T1| minus the T1 picks so far is >= int(p): the
        # first ``prefer_t1`` picks. Then T2, falling back to T1 when T2 has no candidate.
        # Scans are monotonic (each list's iterator resumes where it stopped).
        t1_items, t2_items = iter(self.t1.items()), iter(self.t2.items())
        prefer_t1 = max(0, min(n, len(self.t1) - int(self.target_t1_size) + 1))
        from_t1 = _take(t1_items, prefer_t1, protected)
        from_t2 = _take(t2_items, n - len(from_t1), protected)
        more_t1: list[tuple[OffloadKey, ChunkStatus]] = []
        if len(from_t1) == prefer_t1 and len(from_t1) + len(from_t2) < n:
            more_t1 = _take(t1_items, n - len(from_t1) - len(from_t2), protected)
        if len(from_t1) + len(from_t2) + len(more_t1) < n:
            return None
        resident, t1, t2, b1, b2 = self.chunks, self.t1, self.t2, self.b1, self.b2
        for key, _ in from_t1:
            del resident[key], t1[key]
            b1[key] = None
        for key, _ in more_t1:
            del resident[key], t1[key]
            b1[key] = None
        for key, _ in from_t2:
            del resident[key], t2[key]
            b2[key] = None
        capacity = self.cache_capacity
        for ghost in (b1, b2):
            for _ in range(len(ghost) - capacity):
                ghost.popitem(last=False)
        return from_t1 + from_t2 + more_t1


def _take(items: Iterator[tuple[OffloadKey, ChunkStatus]], k: int, protected: set[OffloadKey]
          ) -> list[tuple[OffloadKey, ChunkStatus]]:
    """Up to ``k`` evictable, unprotected entries from ``items``, consuming only what it scans."""
    out: list[tuple[OffloadKey, ChunkStatus]] = []
    if k <= 0:
        return out
    for key, chunk in items:
        if chunk.ref_cnt == 0 and key not in protected:
            out.append((key, chunk))
            if len(out) == k:
                break
    return out
