"""The CPU offloading manager (upstream ``vllm/v1/kv_offload/cpu/manager.py``, 0.34.0 API).

The manager owns the chunk pool, reference counts, the store-admission tracker, per-request
access records and the event log; a :class:`~prefixcache.v1.kv_offload.cpu.policies.base.
CachePolicy` (``lru`` or ``arc``) orders the resident chunks and picks victims.

Chunk states: pending (``ref_cnt`` -1, its write in flight; never readable, never evicted),
ready and evictable (0), ready and pinned by n loads (n > 0). A chunk slot is free, pending,
ready, or (after a reset that found transfers in flight) quarantined until
``on_reset_flushed``: the four always add up to ``num_chunks``.

Departures from upstream 0.34.0 (each keeps an engine from reading or announcing wrong KV):

* ``reset_cache`` announces the removal of every stored key (upstream emits no event, so a
  consumer replaying events keeps serving keys the tier dropped), and keeps chunks of
  in-flight transfers out of the free pool until ``on_reset_flushed`` (upstream hands them to
  new stores at once, relying on the scheduler never to start one before the flush).
* Misuse raises a typed error before any change (upstream asserts, or ignores it):
  ``complete_store`` of a key with no pending write, ``complete_load`` without a load in
  flight, ``prepare_load`` of a key not ready, a key twice in one offer (upstream allocates
  two chunks for it and leaks one), new keys from a finished request.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext, suppress
from dataclasses import dataclass, field, replace
from itertools import islice, repeat
from operator import le
from typing import cast

from prefixcache.v1.kv_offload.base import (
    LookupResult,
    Medium,
    OffloadingEvent,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    RequestOffloadingContext,
    ScheduleEndContext,
)
from prefixcache.v1.kv_offload.cpu.common import CPULoadStoreSpec
from prefixcache.v1.kv_offload.cpu.policies.base import CachePolicy, ChunkStatus
from prefixcache.v1.kv_offload.cpu.policies.factory import CachePolicyFactory
from prefixcache.v1.kv_offload.errors import (
    KeyNotLoadableError,
    LoadNotPreparedError,
    OffloadArgumentError,
    RequestFinishedError,
    StoreNotPendingError,
)

__all__ = ["CPUOffloadingManager"]


@dataclass(slots=True)
class _RequestCacheAccess:
    """What one request did with the tier since it was first seen (in this generation)."""

    owner: object
    generation: int
    keys_in_order: list[OffloadKey] = field(default_factory=list)  # first uses, in order
    seen_keys: set[OffloadKey] = field(default_factory=set)
    inserted_keys: set[OffloadKey] = field(default_factory=set)
    reused_keys: set[OffloadKey] = field(default_factory=set)
    store_miss_keys: set[OffloadKey] = field(default_factory=set)
    counted_keys: set[OffloadKey] = field(default_factory=set)  # counted toward the threshold
    finished: bool = False


def _int_at_least(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise OffloadArgumentError(f"{name} must be an int >= {low}, got {value!r}")
    return value


class CPUOffloadingManager:
    """A CPU tier of ``num_chunks`` chunks under the cache policy named ``cache_policy``.

    ``store_threshold`` >= 2 admits a new key only once that many distinct requests offered
    it (each request counts a key once); offers are tracked for the ``max_tracker_size`` most
    recently offered keys."""

    def __init__(self, num_chunks: int, cache_policy: str = "lru", enable_events: bool = False,
                 store_threshold: int = 1, max_tracker_size: int = 64_000) -> None:
        _int_at_least("num_chunks", num_chunks, 0)
        _int_at_least("store_threshold", store_threshold, 1)
        _int_at_least("max_tracker_size", max_tracker_size, 1)
        policy_cls = CachePolicyFactory.get_cache_policy_cls(cache_policy)
        self.medium = Medium.CPU
        self._num_chunks = num_chunks
        self._num_allocated_chunks = 0  # fresh ids handed out so far
        self._free_list: list[ChunkStatus] = []  # freed chunks (ids), reused objects
        self._quarantined: set[int] = set()  # chunk ids in flight at a reset, until flushed
        self._quarantined_ahead = 0  # of those, ids not yet passed by fresh allocation
        self._policy: CachePolicy = policy_cls(num_chunks)
        self._get = self._policy.chunks.get  # the residency map's own lookup (C speed)
        # Whether the policy learns from store misses (ARC); others skip building them.
        self._observes_misses = policy_cls.on_store_miss is not CachePolicy.on_store_miss
        self._observes_access = (policy_cls.on_request_access
                                 is not CachePolicy.on_request_access)
        self._num_evictable_cache_chunks = 0
        self._num_write_pending_chunks = 0
        self._num_stored_chunks = 0  # ready chunks (evictable or pinned)
        self.events: list[OffloadingEvent] | None = [] if enable_events else None
        self.store_threshold = store_threshold
        self.max_tracker_size = max_tracker_size
        self.counts: OrderedDict[OffloadKey, int] | None = (
            OrderedDict() if store_threshold >= 2 else None)
        self.stores_skipped_in_current_batch = 0
        self._cache_generation = 0

    # --- accounting (read-only) ---

    @property
    def num_chunks(self) -> int:
        return self._num_chunks

    def get_num_free_chunks(self) -> int:
        """Chunks a store can take without evicting."""
        return (len(self._free_list) + self._num_chunks - self._num_allocated_chunks
                - self._quarantined_ahead)

    @property
    def num_write_pending_chunks(self) -> int:
        return self._num_write_pending_chunks

    @property
    def num_stored_chunks(self) -> int:
        return self._num_stored_chunks

    @property
    def num_evictable_chunks(self) -> int:
        return self._num_evictable_cache_chunks

    @property
    def num_quarantined_chunks(self) -> int:
        return len(self._quarantined)

    # --- chunk pool ---

    def _allocate(self, n: int) -> list[ChunkStatus]:
        """``n`` chunks (the caller checked they exist): never-used ids first, in order, then
        freed ones, most recently freed first; quarantined ids are skipped."""
        fresh = min(n, self._num_chunks - self._num_allocated_chunks - self._quarantined_ahead)
        chunks: list[ChunkStatus]
        if self._quarantined_ahead:
            chunks = []
            while len(chunks) < fresh:
                i = self._num_allocated_chunks
                self._num_allocated_chunks += 1
                if i in self._quarantined:
                    self._quarantined_ahead -= 1
                else:
                    chunks.append(ChunkStatus(i))
        else:
            start = self._num_allocated_chunks
            chunks = [ChunkStatus(i) for i in range(start, start + fresh)]
            self._num_allocated_chunks += fresh
        reused = n - fresh
        if reused:
            free_list = self._free_list
            tail = free_list[-reused:]
            del free_list[-reused:]
            tail.reverse()  # most recently freed first
            for chunk in tail:
                chunk.ref_cnt = -1
            chunks += tail
        return chunks

    # --- request records ---

    def _access(self, req_context: ReqContext) -> _RequestCacheAccess:
        state = req_context.get_state(_RequestCacheAccess)
        if state is None or state.owner is not self or state.generation != self._cache_generation:
            state = _RequestCacheAccess(self, self._cache_generation)
            req_context.set_state(state)
        return state

    def _record_state(self, state: _RequestCacheAccess, keys: Sequence[OffloadKey],
                      reused_keys: Sequence[OffloadKey], req_context: ReqContext,
                      resident_only: bool = False) -> None:
        """Note the request's first use of each of ``keys`` (the policy sees new ones) and
        which it reused (ready chunks it did not insert itself). ``resident_only``: of the new
        keys only those in ``reused_keys`` are resident, the only ones a policy can rank."""
        seen = state.seen_keys
        new_keys = [key for key in keys if key not in seen]
        if new_keys:
            if not resident_only and len(new_keys) > 1:
                new_keys = list(dict.fromkeys(new_keys))  # a load may name a key twice
            seen.update(new_keys)
            state.keys_in_order.extend(new_keys)
            if self._observes_access:
                if resident_only:
                    resident = set(reused_keys)
                    new_keys = [key for key in new_keys if key in resident] if resident else []
                self._policy.on_request_access(new_keys, req_context)
        if reused_keys:
            inserted = state.inserted_keys
            if inserted:
                state.reused_keys.update(key for key in reused_keys if key not in inserted)
            else:
                state.reused_keys.update(reused_keys)

    def _count_offer(self, keys: Sequence[OffloadKey], counted: set[OffloadKey]) -> None:
        """Count an offer toward the threshold; tracked keys of the offer are not dropped."""
        counts = self.counts
        if counts is None:
            return
        protected = 0
        for key in keys:
            if key in counts:
                counts.move_to_end(key)
                if key not in counted:
                    counts[key] += 1
                protected += 1
        unprotected = len(counts) - protected
        for key in keys:
            if key in counts:
                continue
            if len(counts) >= self.max_tracker_size:
                if unprotected == 0:
                    continue
                counts.popitem(last=False)
                unprotected -= 1
            counts[key] = 1

    # --- OffloadingManager interface ---

    def on_new_request(self, req_context: ReqContext) -> RequestOffloadingContext:
        self._access(req_context)
        return RequestOffloadingContext()

    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        chunk = self._get(key)
        if chunk is None:
            return LookupResult.MISS
        return LookupResult.HIT if chunk.ref_cnt >= 0 else LookupResult.HIT_PENDING

    def prepare_load(self, keys: Collection[OffloadKey], req_context: ReqContext
                     ) -> CPULoadStoreSpec:
        """Pin ``keys`` (each must be ``HIT``) until ``complete_load``; their chunk ids."""
        keys = list(keys)
        found = list(map(self._get, keys))
        for key, chunk in zip(keys, found, strict=True):
            if chunk is None or chunk.ref_cnt < 0:
                raise KeyNotLoadableError(
                    f"{key!r} is {'not stored' if chunk is None else 'still being written'}")
        chunks = cast(list[ChunkStatus], found)
        state = self._access(req_context)
        if state.finished and not state.seen_keys.issuperset(keys):
            raise RequestFinishedError(f"request {req_context.req_id!r} finished; it cannot "
                                       f"load keys it did not use")
        newly_pinned = 0
        for chunk in chunks:
            if chunk.ref_cnt == 0:
                newly_pinned += 1
            chunk.ref_cnt += 1
        self._num_evictable_cache_chunks -= newly_pinned
        self._record_state(state, keys, keys, req_context)
        return CPULoadStoreSpec([chunk.chunk_id for chunk in chunks])

    def complete_load(self, keys: Collection[OffloadKey], req_context: ReqContext) -> None:
        """Release one load of each of ``keys`` (a key named twice is released twice)."""
        get = self._get
        done: list[ChunkStatus] = []
        released = 0
        for key in keys:
            chunk = get(key)
            if chunk is None or chunk.ref_cnt < 1:
                for undo in done:  # failure-atomic: restore what this call released
                    undo.ref_cnt += 1
                raise LoadNotPreparedError(f"{key!r} has no load in flight to complete")
            chunk.ref_cnt -= 1
            if not chunk.ref_cnt:
                released += 1
            done.append(chunk)
        self._num_evictable_cache_chunks += released

    def prepare_store(self, keys: Collection[OffloadKey], req_context: ReqContext
                      ) -> PrepareStoreOutput | None:
        """Allocate chunks for the keys of the offer not yet resident (and admitted by the
        threshold), evicting as needed; None, evicting nothing, when not enough chunks can be
        freed. Keys of the offer are never evicted."""
        keys = list(keys)
        offer = set(keys)
        if len(offer) != len(keys):
            raise OffloadArgumentError(f"an offer names a key twice: {keys!r}")
        state = self._access(req_context)
        if state.finished and not offer <= state.seen_keys:
            raise RequestFinishedError(f"request {req_context.req_id!r} finished; it cannot "
                                       f"use new keys {sorted(offer - state.seen_keys)!r}")
        get = self._get
        counts = self.counts
        if counts is not None:
            self._count_offer(keys, state.counted_keys)
            threshold, counted = self.store_threshold, state.counted_keys
        found = list(map(get, keys))
        keys_to_store: list[OffloadKey]
        ready_existing: list[OffloadKey]
        recorded: list[OffloadKey]  # to store or ready, in offer order
        if counts is None and found.count(None) == len(keys):  # all new: the common offer
            keys_to_store, ready_existing, recorded = keys, [], keys
        else:
            keys_to_store, ready_existing, recorded = [], [], []
            for key, chunk in zip(keys, found, strict=True):
                if chunk is None:
                    if counts is not None and counts.get(key, 0) < threshold:
                        if key not in counted:
                            self.stores_skipped_in_current_batch += 1
                        continue
                    keys_to_store.append(key)
                    recorded.append(key)
                elif chunk.ref_cnt >= 0:
                    ready_existing.append(key)
                    recorded.append(key)
        if counts is not None:
            counted.update(keys)
        if self._observes_misses:
            seen_misses = state.store_miss_keys
            new_misses = [key for key in keys_to_store if key not in seen_misses]
            if new_misses:
                self._policy.on_store_miss(new_misses, req_context)
                seen_misses.update(new_misses)
        self._record_state(state, recorded, ready_existing, req_context, resident_only=True)
        if not keys_to_store:
            return PrepareStoreOutput([], CPULoadStoreSpec(()), [])

        evicted_keys: list[OffloadKey] = []
        shortfall = len(keys_to_store) - self.get_num_free_chunks()
        if shortfall > 0:
            if shortfall > self._num_evictable_cache_chunks:
                return None
            evicted = self._policy.evict(shortfall, offer)
            if evicted is None:
                return None
            self._num_evictable_cache_chunks -= len(evicted)
            self._num_stored_chunks -= len(evicted)
            self._free_list.extend([chunk for _, chunk in evicted])
            evicted_keys = [key for key, _ in evicted]
            if self.events is not None:
                self.events.append(OffloadingEvent(evicted_keys, self.medium, removed=True))
        chunks = self._allocate(len(keys_to_store))
        self._policy.insert_all(keys_to_store, chunks, req_context)
        self._num_write_pending_chunks += len(keys_to_store)
        state.inserted_keys.update(keys_to_store)
        return PrepareStoreOutput(keys_to_store,
                                  CPULoadStoreSpec([c.chunk_id for c in chunks]), evicted_keys)

    def complete_store(self, keys: Collection[OffloadKey], req_context: ReqContext,
                       success: bool = True) -> None:
        """Finish the pending writes of ``keys``: readable on success, else released (a
        metadata-only removal event)."""
        policy = self._policy
        keys = list(keys)
        if len(set(keys)) != len(keys):
            raise OffloadArgumentError(f"complete_store names a key twice: {keys!r}")
        found = list(map(self._get, keys))
        for key, chunk in zip(keys, found, strict=True):
            if chunk is None or chunk.ref_cnt >= 0:
                raise StoreNotPendingError(f"{key!r} has no pending write to complete")
        chunks = cast(list[ChunkStatus], found)
        self._num_write_pending_chunks -= len(keys)
        if success:
            for chunk in chunks:
                chunk.ref_cnt = 0
            self._num_evictable_cache_chunks += len(keys)
            self._num_stored_chunks += len(keys)
        else:
            for key, chunk in zip(keys, chunks, strict=True):
                policy.remove(key)
                self._free_list.append(chunk)
        if keys and self.events is not None:
            if success:
                self.events.append(OffloadingEvent(keys, self.medium, removed=False,
                                                   removal_expected=True,
                                                   req_context=req_context))
            else:
                self.events.append(OffloadingEvent(keys, self.medium, removed=True,
                                                   metadata_only=True))

    def on_request_finished(self, req_context: ReqContext) -> None:
        """Commit the request's accesses to the policy (once)."""
        state = req_context.get_state(_RequestCacheAccess)
        if (state is None or state.owner is not self
                or state.generation != self._cache_generation or state.finished):
            return
        state.finished = True
        in_order = state.keys_in_order
        # Groups by the group index's bytes (big endian, so they sort as bytes).
        if not in_order or all(map(bytes.endswith, in_order, repeat(in_order[0][-4:]))):
            grouped = [in_order]
        else:
            groups: dict[bytes, list[OffloadKey]] = {}
            for key in in_order:
                groups.setdefault(key[-4:], []).append(key)
            grouped = [groups[suffix] for suffix in sorted(groups)]
        positions = req_context.offload_key_positions
        key_groups = []
        for keys in grouped:
            with suppress(KeyError):  # a key without a position: first-use order stays
                ranks = list(map(positions.__getitem__, keys))
                if not all(map(le, ranks, islice(ranks, 1, None))):  # not yet head first
                    keys = sorted(keys, key=positions.__getitem__)
            key_groups.append(tuple(keys))
        self._policy.on_request_finished(tuple(key_groups),
                                         state.inserted_keys - state.reused_keys,
                                         state.reused_keys, req_context)

    def on_schedule_end(self, context: ScheduleEndContext) -> None:
        """Nothing is deferred across a step."""
        return

    @property
    def lock(self) -> AbstractContextManager[None]:
        """Single-threaded: callers may enter it; it excludes nothing."""
        return nullcontext()

    def has_pending_work(self) -> bool:
        """Never: the tier does no work between scheduler calls."""
        return False

    def shutdown(self) -> None:
        return

    def reset_cache(self) -> None:
        """Drop every key: nothing stored before is served after. Stored keys are announced
        removed; chunks still pinned or being written stay out of the pool until
        :meth:`on_reset_flushed`, and their completions are no longer accepted."""
        resident = list(self._policy.resident())
        stored = [key for key, chunk in resident if chunk.ref_cnt >= 0]
        self._quarantined.update(chunk.chunk_id for _, chunk in resident if chunk.ref_cnt != 0)
        self._policy.clear()
        self._cache_generation += 1
        self._num_evictable_cache_chunks = 0
        self._num_write_pending_chunks = 0
        self._num_stored_chunks = 0
        self._free_list = []
        self._num_allocated_chunks = 0
        self._quarantined_ahead = len(self._quarantined)
        if stored and self.events is not None:
            self.events.append(OffloadingEvent(stored, self.medium, removed=True))

    def on_reset_flushed(self) -> None:
        """Workers finished every transfer in flight at the last reset: free their chunks."""
        passed = self._num_allocated_chunks
        self._free_list.extend(ChunkStatus(i) for i in sorted(self._quarantined) if i < passed)
        self._quarantined.clear()
        self._quarantined_ahead = 0

    def take_events(self) -> Iterable[OffloadingEvent]:
        """The events since the last call, in order. A metadata-only removal omits keys that
        are resident again (a retry re-allocated them)."""
        if self.events is None:
            return
        events, self.events = self.events, []
        for event in events:
            if event.metadata_only:
                keys = [key for key in event.keys if self._get(key) is None]
                if not keys:
                    continue
                event = replace(event, keys=keys)
            yield event
