"""Drives the bundled CPU offload manager and an upstream one side by side.

A :class:`Side` wraps one manager with its own request contexts, keys and a model of the chunk
contents (what was written to each chunk id), and checks the tier's promises on every call:
a loaded chunk holds its key's content, no chunk being written or read is handed to a new
store, keys of an offer are never evicted, chunk accounting is exact (bundled side), and the
events replayed rebuild the served keys. :func:`run` applies one operation to both sides and
asserts that what they report agrees.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prefixcache.v1.kv_offload import base as ref_base
from prefixcache.v1.kv_offload.cpu.manager import CPUOffloadingManager

NUM_KEYS = 10


def chunk_ids(spec: Any) -> list[int]:
    """The chunk ids of a load/store spec (a numpy array upstream, a tuple here)."""
    return [int(i) for i in spec.block_ids]


@dataclass
class Side:
    """One manager and the driver's record of what it was told."""

    name: str
    manager: Any
    types: Any  # module with ReqContext, make_offload_key, LookupResult
    bundled: bool
    keys: list[Any] = field(default_factory=list)
    contexts: dict[int, Any] = field(default_factory=dict)
    content: dict[int, int] = field(default_factory=dict)  # chunk id -> key index written
    writing: Counter[int] = field(default_factory=Counter)  # chunk ids of pending writes
    reading: Counter[int] = field(default_factory=Counter)  # chunk ids of loads in flight
    replica: set[Any] = field(default_factory=set)  # served keys rebuilt from events

    def __post_init__(self) -> None:
        # Keys 6.. belong to a second KV-cache group (positions still order them all).
        self.keys = [self.types.make_offload_key(bytes([i + 1]) * 8, int(i >= 6))
                     for i in range(NUM_KEYS)]

    def context(self, req: int, positions: bool) -> Any:
        if req not in self.contexts:
            ctx = self.types.ReqContext(req_id=f"r{req}")
            if positions:
                for i, key in enumerate(self.keys):
                    ctx.set_offload_key_position(key, 16 * (i + 1))
            self.contexts[req] = ctx
            self.manager.on_new_request(ctx)
        return self.contexts[req]

    def served(self) -> set[Any]:
        hit = self.types.LookupResult.HIT
        ctx = self.types.ReqContext(req_id="probe")
        return {k for k in self.keys if self.manager.lookup(k, ctx) == hit}

    def drain_events(self) -> list[tuple[bool, bool, tuple[int, ...]]]:
        out = []
        for event in self.manager.take_events():
            idx = tuple(sorted(self.keys.index(k) for k in event.keys))
            out.append((event.removed, event.metadata_only, idx))
            if event.removed:
                self.replica.difference_update(event.keys)
            else:
                self.replica.update(event.keys)
        return out

    def check_accounting(self, stored: int) -> None:
        m = self.manager
        if not self.bundled:
            return
        total = (m.get_num_free_chunks() + m.num_write_pending_chunks + m.num_stored_chunks
                 + m.num_quarantined_chunks)
        assert total == m.num_chunks, (self.name, "accounting", total, m.num_chunks)
        assert m.num_write_pending_chunks == sum(self.writing.values())
        assert m.num_stored_chunks == stored


@dataclass
class Job:
    req: int
    keys: tuple[int, ...]
    chunks: tuple[int, ...] = ()


@dataclass
class Pair:
    """The bundled side and an upstream side, driven by the same operations."""

    sides: list[Side]
    stores: list[Job] = field(default_factory=list)
    loads: list[Job] = field(default_factory=list)
    finished: set[int] = field(default_factory=set)
    positions: dict[int, bool] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)


def new_pair(upstream: Side | None, num_chunks: int, policy: str, threshold: int,
             tracker: int) -> Pair:
    bundled = Side("bundled", CPUOffloadingManager(num_chunks, cache_policy=policy,
                                                   enable_events=True,
                                                   store_threshold=threshold,
                                                   max_tracker_size=tracker),
                   ref_base, bundled=True)
    return Pair([bundled] if upstream is None else [bundled, upstream])


def _agree(pair: Pair, what: str, values: Sequence[object]) -> None:
    first = values[0]
    for side, value in zip(pair.sides[1:], values[1:], strict=True):
        assert value == first, (
            f"{what}: bundled={first!r} {side.name}={value!r}\n" + "\n".join(pair.trace))


def _live(pair: Pair, req: int) -> bool:
    return req not in pair.finished


def op_store(pair: Pair, req: int, key_idx: Sequence[int]) -> None:
    if not _live(pair, req) or not key_idx:
        return
    pair.trace.append(f"store r{req} {list(key_idx)}")
    results = []
    for side in pair.sides:
        ctx = side.context(req, pair.positions.setdefault(req, True))
        out = side.manager.prepare_store([side.keys[i] for i in key_idx], ctx)
        if out is None:
            results.append(None)
            continue
        to_store = tuple(side.keys.index(k) for k in out.keys_to_store)
        evicted = tuple(side.keys.index(k) for k in out.evicted_keys)
        ids = tuple(chunk_ids(out.store_spec))
        assert not set(evicted) & set(key_idx), (side.name, "evicted a key of the offer")
        for cid, k in zip(ids, to_store, strict=True):
            assert side.reading[cid] == 0, (side.name, "store over a chunk being loaded")
            assert side.writing[cid] == 0, (side.name, "store over a chunk being written")
            side.content[cid] = k
            side.writing[cid] += 1
        results.append((to_store, evicted, ids))
    _agree(pair, "prepare_store", results)
    if results[0] is not None and results[0][0]:
        pair.stores.append(Job(req, results[0][0], results[0][2]))


def op_store_now(pair: Pair, req: int, key_idx: Sequence[int]) -> None:
    """A store whose write completes at once (the common case)."""
    before = len(pair.stores)
    op_store(pair, req, key_idx)
    if len(pair.stores) > before:
        op_complete_store(pair, len(pair.stores) - 1, True)


def op_complete_store(pair: Pair, job_no: int, success: bool) -> None:
    if not pair.stores:
        return
    job = pair.stores.pop(job_no % len(pair.stores))
    pair.trace.append(f"complete_store r{job.req} {list(job.keys)} success={success}")
    for side in pair.sides:
        ctx = side.contexts[job.req]
        side.manager.complete_store([side.keys[i] for i in job.keys], ctx, success=success)
        for cid in job.chunks:
            side.writing[cid] -= 1


def op_load(pair: Pair, req: int, key_idx: Sequence[int]) -> None:
    if not _live(pair, req):
        return
    hits = [side.served() for side in pair.sides]
    _agree(pair, "served", [tuple(sorted(side.keys.index(k) for k in h))
                            for side, h in zip(pair.sides, hits, strict=True)])
    chosen = [i for i in dict.fromkeys(key_idx) if pair.sides[0].keys[i] in hits[0]]
    if not chosen:
        return
    pair.trace.append(f"load r{req} {chosen}")
    results = []
    for side in pair.sides:
        ctx = side.context(req, pair.positions.setdefault(req, True))
        ids = tuple(chunk_ids(side.manager.prepare_load([side.keys[i] for i in chosen], ctx)))
        for cid, k in zip(ids, chosen, strict=True):
            assert side.content.get(cid) == k, (side.name, "HIT chunk holds other content")
            side.reading[cid] += 1
        results.append(ids)
    _agree(pair, "prepare_load", results)
    pair.loads.append(Job(req, tuple(chosen), results[0]))


def op_load_now(pair: Pair, req: int, key_idx: Sequence[int]) -> None:
    """A load whose transfer completes at once (a prefix hit read back)."""
    before = len(pair.loads)
    op_load(pair, req, key_idx)
    if len(pair.loads) > before:
        op_complete_load(pair, len(pair.loads) - 1)


def op_complete_load(pair: Pair, job_no: int) -> None:
    if not pair.loads:
        return
    job = pair.loads.pop(job_no % len(pair.loads))
    pair.trace.append(f"complete_load r{job.req} {list(job.keys)}")
    for side in pair.sides:
        for cid, k in zip(job.chunks, job.keys, strict=True):
            assert side.content.get(cid) == k, (side.name, "content changed during a load")
            side.reading[cid] -= 1
        side.manager.complete_load([side.keys[i] for i in job.keys], side.contexts[job.req])


def op_lookup(pair: Pair, req: int, key: int) -> None:
    results = []
    for side in pair.sides:
        ctx = side.context(req, pair.positions.setdefault(req, True))
        results.append(side.manager.lookup(side.keys[key], ctx).name)
    _agree(pair, f"lookup {key}", results)


def op_finish(pair: Pair, req: int) -> None:
    if not _live(pair, req):
        return
    pair.trace.append(f"finish r{req}")
    pair.finished.add(req)
    for side in pair.sides:
        side.manager.on_request_finished(side.context(req, pair.positions.setdefault(req, True)))


def op_new_request(pair: Pair, req: int, positions: bool) -> None:
    if req in pair.positions:
        return
    pair.trace.append(f"new r{req} positions={positions}")
    pair.positions[req] = positions
    for side in pair.sides:
        side.context(req, positions)


def op_reset(pair: Pair) -> None:
    op_events(pair)
    pair.trace.append("reset")
    for side in pair.sides:
        before = side.served()
        side.manager.reset_cache()
        if side.bundled:
            side.manager.on_reset_flushed()
            side.drain_events()  # the bundled tier announces the removal of what it served
            assert not side.replica, (side.name, "reset left announced keys", before)
        else:
            side.replica.clear()  # upstream announces nothing on reset (design difference)
        side.writing.clear()
        side.reading.clear()
    pair.stores.clear()
    pair.loads.clear()


def op_events(pair: Pair) -> None:
    drained = [side.drain_events() for side in pair.sides]
    _agree(pair, "events", drained)
    for side in pair.sides:
        assert side.replica == side.served(), (side.name, "events replay != served keys")


def check(pair: Pair) -> None:
    """Invariants after every operation: served keys agree; accounting is exact (bundled)."""
    served = [side.served() for side in pair.sides]
    _agree(pair, "served", [tuple(sorted(s.keys.index(k) for k in h))
                            for s, h in zip(pair.sides, served, strict=True)])
    pair.sides[0].check_accounting(len(served[0]))


OPS: dict[str, Callable[..., None]] = {
    "store": op_store, "store_now": op_store_now, "complete_store": op_complete_store,
    "load": op_load, "load_now": op_load_now,
    "complete_load": op_complete_load, "lookup": op_lookup, "finish": op_finish,
    "new": op_new_request, "reset": op_reset, "events": op_events,
}
