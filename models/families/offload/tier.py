"""The model of a CPU offload tier: which keys it holds (stored or being written), which chunk
holds each, what each chunk holds (a shadow of the contents the workers wrote), the loads in
flight, the chunks a reset left to transfers still running, the admission tracker and the
policy's order.

The model decides what the contract decides: whether a store fits, which keys are admitted,
which keys are evicted (the policy), what ``lookup`` answers. It leaves open what the tier may
choose: which free chunk a new key gets (the judge checks it is free, in range and not in use).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass, field

from models.families.offload.ops import NUM_KEYS, group, position
from models.families.offload.policies import Policy, policy


@dataclass
class RequestState:
    """What one request did with the tier in one generation (between resets)."""

    generation: int
    seen_order: list[int] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)
    inserted: set[int] = field(default_factory=set)
    reused: set[int] = field(default_factory=set)
    store_miss: set[int] = field(default_factory=set)
    counted: set[int] = field(default_factory=set)
    finished: bool = False


@dataclass(frozen=True)
class StorePlan:
    """What ``prepare_store`` must answer: the keys to store (offer order) and the keys
    evicted (None: the store is refused), with the offer's keys that were absent before the
    threshold filtered them (``absent``)."""

    to_store: tuple[int, ...]
    evicted: tuple[int, ...] | None
    absent: tuple[int, ...]


@dataclass
class Job:
    """A transfer in flight: request, keys (in order) and their chunks."""

    req: int
    keys: tuple[int, ...]
    chunks: tuple[int, ...]


class TierModel:
    """See the module docstring. ``policy_name``: ``lru`` or ``arc``."""

    def __init__(self, num_chunks: int, policy_name: str, store_threshold: int = 1,
                 max_tracker_size: int = 64_000) -> None:
        self.num_chunks = num_chunks
        self.policy: Policy = policy(policy_name, num_chunks)
        self.store_threshold = store_threshold
        self.max_tracker_size = max_tracker_size
        self.counts: OrderedDict[int, int] | None = (
            OrderedDict() if store_threshold >= 2 else None)
        self.chunk: dict[int, int | None] = {}  # resident key -> chunk (None: not yet known)
        self.ready: set[int] = set()  # resident keys whose write completed
        self.loads: Counter[int] = Counter()  # key -> loads in flight
        self.content: dict[int, int | None] = {}  # chunk -> the key whose KV it holds
        self.reading: Counter[int] = Counter()  # chunk -> loads in flight reading it
        self.quarantined: set[int] = set()  # chunks of transfers in flight at a reset
        self.positions: dict[int, bool] = {}  # request -> whether it has positions
        self.requests: dict[int, RequestState] = {}
        self.generation = 0
        self.stores: list[Job] = []  # store jobs in flight (this generation)
        self.load_jobs: list[Job] = []
        self.finished: set[int] = set()

    # ------------------------------------------------------------------ queries

    def lookup(self, key: int) -> str:
        if key not in self.chunk:
            return "MISS"
        return "HIT" if key in self.ready else "HIT_PENDING"

    def served(self) -> set[int]:
        """The keys a load may read now."""
        return set(self.ready)

    def free(self) -> int:
        """Chunks a store takes without evicting."""
        return self.num_chunks - len(self.chunk) - len(self.quarantined)

    def evictable(self) -> set[int]:
        return {k for k in self.ready if not self.loads[k]}

    def busy_chunks(self) -> dict[int, str]:
        """Chunks no new store may take, and why."""
        busy = {c: "being read by a load" for c, n in self.reading.items() if n}
        busy.update({c: "in flight at a reset" for c in self.quarantined})
        for key, chunk in self.chunk.items():
            if chunk is not None:
                busy.setdefault(chunk, f"holding key {key}" if key in self.ready
                                else f"being written for key {key}")
        return busy

    def position_of(self, req: int, key: int) -> int | None:
        return position(key) if self.positions.get(req, True) else None

    # ------------------------------------------------------------------ requests

    def new_request(self, req: int, positions: bool) -> None:
        self.positions.setdefault(req, positions)
        self.state(req)

    def state(self, req: int) -> RequestState:
        self.positions.setdefault(req, True)
        st = self.requests.get(req)
        if st is None or st.generation != self.generation:
            st = self.requests[req] = RequestState(self.generation)
        return st

    def _record(self, req: int, keys: list[int], reused: list[int]) -> None:
        st = self.state(req)
        new = [k for k in dict.fromkeys(keys) if k not in st.seen]
        if new:
            st.seen.update(new)
            st.seen_order.extend(new)
            self.policy.access(new, req, lambda k: self.position_of(req, k),
                               lambda k: k in self.chunk)
        st.reused.update(k for k in reused if k not in st.inserted)

    def finish(self, req: int) -> None:
        self.finished.add(req)
        st = self.requests.get(req)
        if st is None or st.generation != self.generation or st.finished:
            return
        st.finished = True
        if self.positions.get(req, True):
            ordered = sorted(st.seen_order, key=position)
        else:
            ordered = [k for g in (0, 1) for k in st.seen_order if group(k) == g]
        self.policy.finish(ordered, st.inserted - st.reused, set(st.reused),
                           lambda k: k in self.chunk)

    # ------------------------------------------------------------------ loads

    def prepare_load(self, req: int, keys: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        for key, chunk in zip(keys, chunks, strict=True):
            self.loads[key] += 1
            self.reading[chunk] += 1
        self._record(req, list(keys), list(keys))
        self.load_jobs.append(Job(req, keys, chunks))

    def load_job(self, req: int, keys: tuple[int, ...]) -> Job | None:
        return next((j for j in self.load_jobs if j.req == req and j.keys == keys), None)

    def complete_load(self, job: Job) -> None:
        self.load_jobs.remove(job)
        for key, chunk in zip(job.keys, job.chunks, strict=True):
            self.loads[key] -= 1
            self.reading[chunk] -= 1

    # ------------------------------------------------------------------ stores

    def _track(self, keys: tuple[int, ...], counted: set[int]) -> None:
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

    def prepare_store(self, req: int, keys: tuple[int, ...]) -> StorePlan:
        """The store's plan, applied to the model (new keys resident, chunks unknown until
        :meth:`assign`), evictions included; a refused store changes only what the request
        recorded (the tracker, the policy's observations)."""
        st = self.state(req)
        if self.counts is not None:
            self._track(keys, st.counted)
        absent = tuple(k for k in keys if k not in self.chunk)
        ready_existing = [k for k in keys if k in self.ready]
        to_store = absent
        if self.counts is not None:
            to_store = tuple(k for k in absent if self.counts.get(k, 0) >= self.store_threshold)
            st.counted.update(keys)
        misses = [k for k in to_store if k not in st.store_miss]
        if misses:
            self.policy.store_miss(misses)
            st.store_miss.update(misses)
        recorded = set(to_store) | set(ready_existing)
        self._record(req, [k for k in keys if k in recorded], ready_existing)
        if not to_store:
            return StorePlan((), (), absent)
        need = len(to_store) - self.free()
        evicted: list[int] = []
        if need > 0:
            evictable = self.evictable()
            victims = self.policy.evict(need, set(keys), evictable) \
                if need <= len(evictable) else None
            if victims is None:
                return StorePlan(to_store, None, absent)
            evicted = victims
            for key in victims:
                del self.chunk[key]
                self.ready.discard(key)
        for key in to_store:
            self.policy.insert(key, req, self.position_of(req, key))
            self.chunk[key] = None
        st.inserted.update(to_store)
        return StorePlan(to_store, tuple(evicted), absent)

    def assign(self, req: int, keys: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        """The chunks the tier gave a store's keys: their content is being written."""
        for key, chunk in zip(keys, chunks, strict=True):
            self.chunk[key] = chunk
            self.content[chunk] = None
        if keys:
            self.stores.append(Job(req, keys, chunks))

    def store_job(self, req: int, keys: tuple[int, ...]) -> Job | None:
        return next((j for j in self.stores if j.req == req and j.keys == keys), None)

    def complete_store(self, job: Job, success: bool) -> None:
        self.stores.remove(job)
        for key, chunk in zip(job.keys, job.chunks, strict=True):
            if success:
                self.ready.add(key)
                self.content[chunk] = key
            else:
                self.policy.remove(key)
                del self.chunk[key]

    # ------------------------------------------------------------------ reset

    def reset(self) -> None:
        """Forget every key; chunks of transfers in flight stay out of use until
        :meth:`flushed`, and their content is unknown."""
        for job in self.stores:
            self.quarantined.update(job.chunks)
        for job in self.load_jobs:
            self.quarantined.update(job.chunks)
        for chunk in self.quarantined:
            self.content[chunk] = None
        self.stores.clear()
        self.load_jobs.clear()
        self.chunk.clear()
        self.ready.clear()
        self.loads.clear()
        self.reading.clear()
        self.policy.clear()
        self.generation += 1

    def flushed(self) -> None:
        self.quarantined.clear()

    def all_keys(self) -> range:
        return range(NUM_KEYS)
