"""LRU with per-request recency (upstream ``cpu/policies/lru.py``, 0.34.0 semantics).

Order. Every resident key has a rank; the least rank is evicted first. Ranks are pairs
compared lexicographically, drawn from one counter:

* a key stored without a known position, or committed when a request finishes, gets
  ``(next, 0)``: it becomes the most recently used;
* a key a request stores or first accesses with a known end-token position ``pos`` gets the
  request's provisional rank ``(R, -pos)``, where ``R`` was drawn when the policy first saw the
  request: all keys of a running request sit together at ``R`` in the order, tails before
  heads; an access never lowers a rank;
* ``on_request_finished`` commits the request's keys tail to head, so its head ends most
  recent.

Ties (equal pairs, e.g. two groups' keys at one position) fall to the smaller key.

Structure. ``_order`` holds the ranks' first components in increasing order, each entry a
committed key or a request's bucket (its keys with their positions), so every rank change is
an append or a bucket join: O(1) per key. A bucket keeps its keys sorted lazily (already
sorted when a request's keys arrive head first, as schedulers store them). ``evict`` walks
from the cold end past pinned and protected chunks; it selects all victims before removing
any, so a failed eviction changes nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from operator import lt
from typing import cast

from prefixcache.v1.kv_offload.base import OffloadKey, ReqContext
from prefixcache.v1.kv_offload.cpu.policies.base import (
    CachePolicy,
    ChunkStatus,
    order_request_keys,
)

__all__ = ["LRUCachePolicy"]

_Sort = tuple[int, OffloadKey]  # (-position, key): ascending = eviction order in a bucket


class _Bucket:
    """The keys holding one request's provisional rank ``R``, with their positions."""

    __slots__ = ("attached", "members", "order", "rank", "sorted")

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.members: dict[OffloadKey, int] = {}
        # Descending (-position, key): the next victim is last. May hold stale entries
        # (keys that left), skipped by ``victims``; rebuilt when unsorted or too stale.
        self.order: list[_Sort] = []
        self.sorted = True
        self.attached = True

    def add(self, key: OffloadKey, position: int) -> None:
        self.members[key] = position
        entry = (-position, key)
        if self.order and self.sorted and entry > self.order[-1]:
            self.sorted = False
        self.order.append(entry)

    def victims(self) -> Iterator[OffloadKey]:
        """Members in eviction order (a key may repeat; the caller skips repeats)."""
        if not self.sorted or len(self.order) > 2 * len(self.members) + 16:
            self.order = sorted(((-p, k) for k, p in self.members.items()), reverse=True)
            self.sorted = True
        members = self.members
        for neg_position, key in reversed(self.order):
            if members.get(key) == -neg_position:
                yield key


def _ordered(key_groups: Sequence[Sequence[OffloadKey]], req_context: ReqContext
             ) -> Sequence[OffloadKey]:
    """``order_request_keys``; one group arrives ordered already (the manager sorts each
    group the same way)."""
    if len(key_groups) == 1:
        return key_groups[0]
    return order_request_keys(key_groups, req_context)


@dataclass(slots=True)
class _RequestRank:
    owner: object
    generation: int
    bucket: _Bucket


class LRUCachePolicy(CachePolicy):
    """Least-recently-used eviction with per-request recency (see the module docstring)."""

    def __init__(self, cache_capacity: int) -> None:
        super().__init__(cache_capacity)
        self._rank: dict[OffloadKey, int] = {}  # committed keys -> first rank component
        self._bucket_of: dict[OffloadKey, _Bucket] = {}  # provisionally ranked keys
        self._order: OrderedDict[OffloadKey | _Bucket, None] = OrderedDict()
        self._next_rank = 0
        self._generation = 0

    # --- ranks ---

    def _first(self, entry: OffloadKey | _Bucket) -> int:
        return entry.rank if isinstance(entry, _Bucket) else self._rank[entry]

    def _request_bucket(self, req_context: ReqContext) -> _Bucket:
        state = req_context.get_state(_RequestRank)
        if state is None or state.owner is not self or state.generation != self._generation:
            self._next_rank += 1
            bucket = _Bucket(self._next_rank)
            self._order[bucket] = None
            state = _RequestRank(self, self._generation, bucket)
            req_context.set_state(state)
        return state.bucket

    def _detach(self, key: OffloadKey) -> None:
        if key in self._rank:
            del self._rank[key]
            del self._order[key]
        else:
            del self._bucket_of.pop(key).members[key]

    def _join(self, key: OffloadKey, bucket: _Bucket, position: int) -> None:
        if not bucket.attached:
            self._reattach(bucket)
        bucket.add(key, position)
        self._bucket_of[key] = bucket

    def _reattach(self, bucket: _Bucket) -> None:
        """Put back a bucket dropped (empty) from the cold end: nothing ranked below it can
        appear since but buckets reattached earlier, which stay before it."""
        before: list[OffloadKey | _Bucket] = []
        while self._order:
            first = next(iter(self._order))
            if self._first(first) > bucket.rank:
                break
            before.append(first)
            del self._order[first]
        self._order[bucket] = None
        self._order.move_to_end(bucket, last=False)
        for entry in reversed(before):
            self._order[entry] = None
            self._order.move_to_end(entry, last=False)
        bucket.attached = True

    # --- CachePolicy ---

    def insert(self, key: OffloadKey, chunk: ChunkStatus, req_context: ReqContext) -> None:
        self.chunks[key] = chunk
        position = req_context.get_offload_key_position(key)
        if position is None:
            self._next_rank += 1
            self._rank[key] = self._next_rank
            self._order[key] = None
        else:
            self._join(key, self._request_bucket(req_context), position)

    def insert_all(self, keys: Sequence[OffloadKey], chunks: Sequence[ChunkStatus],
                   req_context: ReqContext) -> None:
        positions = req_context.offload_key_positions
        try:
            ranked = [positions[key] for key in keys]
        except KeyError:  # some key has no position: one at a time
            for key, chunk in zip(keys, chunks, strict=True):
                self.insert(key, chunk, req_context)
            return
        if not keys:
            return
        self.chunks.update(zip(keys, chunks, strict=True))
        bucket = self._request_bucket(req_context)
        if not bucket.attached:
            self._reattach(bucket)
        bucket.members.update(zip(keys, ranked, strict=True))
        entries = [(-position, key) for position, key in zip(ranked, keys, strict=True)]
        order = bucket.order
        # Head-first positions (strictly increasing) keep the order sorted; anything else is
        # sorted when an eviction first walks the bucket.
        if bucket.sorted and ((order and entries[0] > order[-1])
                              or not all(map(lt, ranked, islice(ranked, 1, None)))):
            bucket.sorted = False
        order.extend(entries)
        self._bucket_of.update(dict.fromkeys(keys, bucket))

    def remove(self, key: OffloadKey) -> None:
        del self.chunks[key]
        self._detach(key)

    def on_request_access(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        bucket = self._request_bucket(req_context)
        positions = req_context.offload_key_positions
        chunks, bucket_of, rank, order = self.chunks, self._bucket_of, self._rank, self._order
        for key in keys:
            position = positions.get(key)
            if position is None or key not in chunks:
                continue
            current = bucket_of.get(key)
            if current is None:
                if rank[key] > bucket.rank:
                    continue
                del rank[key]
                del order[key]
            elif current.rank > bucket.rank or (
                    current.rank == bucket.rank and current.members[key] <= position):
                continue
            else:
                del current.members[key]
            if not bucket.attached:
                self._reattach(bucket)
            bucket.add(key, position)
            bucket_of[key] = bucket

    def on_request_finished(self, key_groups: Sequence[Sequence[OffloadKey]],
                            insertion_only_keys: set[OffloadKey],
                            reused_keys: set[OffloadKey], req_context: ReqContext) -> None:
        keys = _ordered(key_groups, req_context)
        chunks, rank, order, bucket_of = self.chunks, self._rank, self._order, self._bucket_of
        next_rank = self._next_rank
        for key in reversed(keys):
            if key not in chunks:
                continue
            next_rank += 1
            if key in rank:
                order.move_to_end(key)
            else:
                del bucket_of.pop(key).members[key]
                order[key] = None
            rank[key] = next_rank
        self._next_rank = next_rank

    def clear(self) -> None:
        self.chunks.clear()
        self._rank.clear()
        self._bucket_of.clear()
        self._order.clear()
        self._next_rank = 0
        self._generation += 1

    def evict(self, n: int, protected: set[OffloadKey]
              ) -> list[tuple[OffloadKey, ChunkStatus]] | None:
        if n <= 0:
            return []
        chunks = self.chunks
        selected: dict[OffloadKey, ChunkStatus] = {}
        cold_empty: list[_Bucket] = []  # empty buckets at the cold end, dropped on success
        at_cold_end = True
        for entry in self._order:
            if entry.__class__ is _Bucket:
                bucket = entry
                if not bucket.members:
                    if at_cold_end:
                        cold_empty.append(bucket)
                    continue
                at_cold_end = False
                for key in bucket.victims():
                    chunk = chunks[key]
                    if chunk.ref_cnt == 0 and key not in protected and key not in selected:
                        selected[key] = chunk
                        if len(selected) == n:
                            break
            else:
                at_cold_end = False
                key = cast(OffloadKey, entry)
                chunk = chunks[key]
                if chunk.ref_cnt == 0 and key not in protected:
                    selected[key] = chunk
            if len(selected) == n:
                break
        if len(selected) < n:
            return None
        rank, order, bucket_of = self._rank, self._order, self._bucket_of
        for key in selected:
            del chunks[key]
            holder = bucket_of.pop(key, None)
            if holder is None:
                del rank[key], order[key]
            else:
                del holder.members[key]
        for bucket in cold_empty:
            del self._order[bucket]
            bucket.attached = False
        return list(selected.items())
