"""The eviction rank: which evictable ids may be evicted next.

Rank is ``(last_accessed, -num_hashed_tokens)``, smallest first: least recently used, ties to
the deepest block. Upstream breaks remaining ties by insertion order (Aphrodite) or by id
(vLLM); the contract leaves them open, so the permitted victims are the whole minimal bucket.
Buckets plus a lazily cleaned heap of their keys make every operation O(log n).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, KeysView

Rank = tuple[float, int]


class LruIndex:
    __slots__ = ("_buckets", "_heap", "_rank")

    def __init__(self) -> None:
        self._rank: dict[int, Rank] = {}
        self._buckets: dict[Rank, set[int]] = {}
        self._heap: list[Rank] = []

    def clone(self) -> LruIndex:
        other = LruIndex()
        other._rank = dict(self._rank)
        other._buckets = {rank: set(ids) for rank, ids in self._buckets.items()}
        other._heap = list(self._heap)
        return other

    def __len__(self) -> int:
        return len(self._rank)

    def __contains__(self, block_id: object) -> bool:
        return block_id in self._rank

    def __iter__(self) -> Iterator[int]:
        return iter(self._rank)

    def ids(self) -> KeysView[int]:
        """The candidate ids, as a live set-like view (compares equal to a set of them)."""
        return self._rank.keys()

    def add(self, block_id: int, last_accessed: float, hashed_tokens: int) -> None:
        self.remove(block_id)
        rank = (last_accessed, -hashed_tokens)
        self._rank[block_id] = rank
        bucket = self._buckets.get(rank)
        if bucket is None:
            bucket = self._buckets[rank] = set()
            heapq.heappush(self._heap, rank)
        bucket.add(block_id)

    def remove(self, block_id: int) -> None:
        """Drop ``block_id`` if present."""
        rank = self._rank.pop(block_id, None)
        if rank is None:
            return
        bucket = self._buckets[rank]
        bucket.discard(block_id)
        if not bucket:
            del self._buckets[rank]
            if len(self._heap) > 2 * len(self._buckets) + 16:
                self._heap = list(self._buckets)
                heapq.heapify(self._heap)

    def touch(self, block_id: int, last_accessed: float) -> None:
        """``evictor.update``: a new access time, same depth."""
        _, neg_tokens = self._rank[block_id]
        self.add(block_id, last_accessed, -neg_tokens)

    def rank(self, block_id: int) -> Rank:
        return self._rank[block_id]

    def minimal(self) -> frozenset[int]:
        """Every id a conforming LRU evictor may evict next (empty when nothing is evictable)."""
        while self._heap and self._heap[0] not in self._buckets:
            heapq.heappop(self._heap)
        if not self._heap:
            return frozenset()
        return frozenset(self._buckets[self._heap[0]])

    def clear(self) -> None:
        self._rank.clear()
        self._buckets.clear()
        self._heap.clear()
