"""The bundled CPU offload manager, clause by clause of its contract, and its misuse errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from prefixcache.errors import PrefixCacheError
from prefixcache.v1.kv_offload.base import (
    LookupResult,
    OffloadKey,
    ReqContext,
    make_offload_key,
    replay_events,
)
from prefixcache.v1.kv_offload.cpu.manager import CPUOffloadingManager
from prefixcache.v1.kv_offload.errors import (
    KeyNotLoadableError,
    LoadNotPreparedError,
    OffloadArgumentError,
    RequestFinishedError,
    StoreNotPendingError,
)

K = [make_offload_key(bytes([i + 1]) * 8, 0) for i in range(12)]
HIT, MISS, PENDING = LookupResult.HIT, LookupResult.MISS, LookupResult.HIT_PENDING


def ctx(name: str = "r", positions: bool = True) -> ReqContext:
    c = ReqContext(req_id=name)
    if positions:
        for i, key in enumerate(K):
            c.set_offload_key_position(key, 16 * (i + 1))
    return c


def stored(m: CPUOffloadingManager, keys: list[OffloadKey], c: ReqContext | None = None
           ) -> Any:
    c = c or ctx()
    out = m.prepare_store(keys, c)
    assert out is not None
    m.complete_store(out.keys_to_store, c)
    return out


def accounting(m: CPUOffloadingManager) -> None:
    total = (m.get_num_free_chunks() + m.num_write_pending_chunks + m.num_stored_chunks
             + m.num_quarantined_chunks)
    assert total == m.num_chunks


def served(m: CPUOffloadingManager) -> set[OffloadKey]:
    return {k for k in K if m.lookup(k, ctx("probe")) is HIT}


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_states_pending_hit_loadable(policy: str) -> None:
    m = CPUOffloadingManager(4, cache_policy=policy)
    c = ctx()
    out = m.prepare_store(K[:2], c)
    assert out is not None and out.keys_to_store == K[:2] and out.evicted_keys == []
    assert [m.lookup(k, c) for k in K[:3]] == [PENDING, PENDING, MISS]
    with pytest.raises(KeyNotLoadableError):
        m.prepare_load([K[0]], c)
    m.complete_store(K[:2], c)
    assert m.lookup(K[0], c) is HIT
    assert m.prepare_load(K[:2], c).chunk_ids == out.store_spec.chunk_ids
    accounting(m)


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_no_eviction_of_pending_loading_or_offered_chunks(policy: str) -> None:
    m = CPUOffloadingManager(2, cache_policy=policy)
    stored(m, [K[0]])
    c = ctx("w")
    assert m.prepare_store([K[1]], c) is not None  # pending write
    m.prepare_load([K[0]], ctx())  # in flight
    assert m.prepare_store([K[2]], ctx("x")) is None  # neither may go
    m.complete_store([K[1]], c)
    # K[1] is evictable but belongs to the offer: the store fails rather than evict it.
    assert m.prepare_store([K[1], K[2]], ctx("y")) is None
    assert served(m) == {K[0], K[1]}
    out = m.prepare_store([K[2]], ctx("z"))
    assert out is not None and out.evicted_keys == [K[1]]
    accounting(m)


def test_failed_eviction_changes_nothing() -> None:
    m = CPUOffloadingManager(3)
    stored(m, K[:3])
    m.prepare_load([K[1]], ctx())
    before = copy.deepcopy(m.__dict__["_policy"].__dict__["chunks"])
    assert m.prepare_store(K[3:6], ctx("n")) is None
    assert served(m) == set(K[:3])
    assert {k: c.ref_cnt for k, c in before.items()} == {
        k: c.ref_cnt for k, c in m._policy.chunks.items()}  # type: ignore[attr-defined]
    accounting(m)


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_failed_store_releases_chunks_and_reports_metadata_only(policy: str) -> None:
    m = CPUOffloadingManager(2, cache_policy=policy, enable_events=True)
    c = ctx()
    out = m.prepare_store(K[:2], c)
    assert out is not None
    m.complete_store(K[:2], c, success=False)
    assert m.get_num_free_chunks() == 2 and served(m) == set()
    events = list(m.take_events())
    assert [(e.removed, e.metadata_only, e.keys) for e in events] == [(True, True, K[:2])]
    accounting(m)


def test_load_release_and_misuse_are_atomic() -> None:
    m = CPUOffloadingManager(4)
    stored(m, K[:2])
    c = ctx()
    m.prepare_load([K[0], K[0]], c)
    with pytest.raises(LoadNotPreparedError):
        m.complete_load([K[0], K[1]], c)  # K[1] never loaded: nothing released
    m.complete_load([K[0]], c)
    m.complete_load([K[0]], c)
    assert m.num_evictable_chunks == 2
    with pytest.raises(LoadNotPreparedError):
        m.complete_load([K[0]], c)
    with pytest.raises(KeyNotLoadableError):
        m.prepare_load([K[0], K[5]], c)
    assert m.num_evictable_chunks == 2  # the failed prepare_load pinned nothing


def test_store_completed_twice_or_never_prepared() -> None:
    m = CPUOffloadingManager(4)
    c = ctx()
    out = m.prepare_store(K[:2], c)
    assert out is not None
    m.complete_store(K[:2], c)
    with pytest.raises(StoreNotPendingError):
        m.complete_store([K[0]], c)
    with pytest.raises(StoreNotPendingError):
        m.complete_store([K[3]], c, success=False)
    assert served(m) == set(K[:2])
    accounting(m)


def test_argument_errors() -> None:
    for bad in ({"num_chunks": -1}, {"num_chunks": 2, "store_threshold": 0},
                {"num_chunks": 2, "max_tracker_size": 0}, {"num_chunks": 2,
                                                           "cache_policy": "fifo"}):
        with pytest.raises(OffloadArgumentError):
            CPUOffloadingManager(**bad)  # type: ignore[arg-type]
    m = CPUOffloadingManager(4)
    with pytest.raises(OffloadArgumentError):
        m.prepare_store([K[0], K[0]], ctx())
    assert m.get_num_free_chunks() == 4
    assert issubclass(OffloadArgumentError, PrefixCacheError)


def test_finished_request_cannot_use_new_keys() -> None:
    m = CPUOffloadingManager(4)
    c = ctx()
    stored(m, [K[0]], c)
    m.on_request_finished(c)
    with pytest.raises(RequestFinishedError):
        m.prepare_store([K[1]], c)
    assert m.lookup(K[1], c) is MISS
    m.prepare_load([K[0]], c)  # a key it used is fine


def test_reset_serves_nothing_and_quarantines_in_flight_chunks() -> None:
    m = CPUOffloadingManager(3, enable_events=True)
    stored(m, K[:2])
    m.prepare_load([K[0]], ctx())
    assert m.prepare_store([K[2]], ctx("w")) is not None
    replica = replay_events(m.take_events())
    m.reset_cache()
    assert served(m) == set() and m.lookup(K[2], ctx()) is MISS
    assert replay_events(m.take_events(), replica) == set()
    assert m.num_quarantined_chunks == 2 and m.get_num_free_chunks() == 1
    accounting(m)
    out = m.prepare_store([K[5]], ctx("n"))
    assert out is not None and out.store_spec.chunk_ids == (1,)  # not 0 (loading), not 2
    assert m.prepare_store([K[6]], ctx("n2")) is None
    with pytest.raises(LoadNotPreparedError):
        m.complete_load([K[0]], ctx())  # a pre-reset completion is not accepted
    m.on_reset_flushed()
    assert m.get_num_free_chunks() == 2
    accounting(m)


def test_store_threshold_counts_each_request_once() -> None:
    m = CPUOffloadingManager(4, store_threshold=2)
    a, b = ctx("a"), ctx("b")
    first = m.prepare_store([K[0]], a)
    again = m.prepare_store([K[0]], a)  # a retry by the same request is not a second use
    assert first is not None and first.keys_to_store == []
    assert again is not None and again.keys_to_store == []
    out = m.prepare_store([K[0]], b)
    assert out is not None and out.keys_to_store == [K[0]]
    assert m.stores_skipped_in_current_batch == 1


def test_lru_evicts_least_recently_used() -> None:
    m = CPUOffloadingManager(3)
    for i in range(3):
        c = ctx(f"s{i}")
        stored(m, [K[i]], c)
        m.on_request_finished(c)
    user = ctx("u")
    m.prepare_load([K[0]], user)
    m.complete_load([K[0]], user)
    m.on_request_finished(user)  # K[0] is now the most recent: K[1] is the LRU
    out = m.prepare_store([K[5]], ctx("n"))
    assert out is not None and out.evicted_keys == [K[1]]


def test_lru_running_request_ranks_tail_first() -> None:
    m = CPUOffloadingManager(3)
    c = ctx("long")
    stored(m, K[:3], c)  # one running request: its tail goes first, its head last
    out = m.prepare_store([K[9]], ctx("n"))
    assert out is not None and out.evicted_keys == [K[2]]


def test_arc_promotes_reuse_adapts_and_falls_back() -> None:
    m = CPUOffloadingManager(2, cache_policy="arc")
    policy: Any = m._policy
    a = ctx("a")
    stored(m, K[:2], a)
    m.on_request_finished(a)
    b = ctx("b")
    m.prepare_load([K[0]], b)
    m.complete_load([K[0]], b)
    m.on_request_finished(b)
    assert list(policy.t1) == [K[1]] and list(policy.t2) == [K[0]]
    # T1 is preferred (|T1| >= p = 0) but its only chunk is pinned: fall back to T2.
    m.prepare_load([K[1]], ctx("c"))
    out = m.prepare_store([K[2]], ctx("d"))
    assert out is not None and out.evicted_keys == [K[0]] and list(policy.b2) == [K[0]]
    # Offering the B2 ghost again shrinks the T1 target (already 0: stays 0), and a B1 ghost
    # grows it by max(1, |B2|/|B1|).
    m.complete_load([K[1]], ctx("c"))
    out = m.prepare_store([K[3]], ctx("e"))
    assert out is not None and out.evicted_keys == [K[1]] and list(policy.b1) == [K[1]]
    f = ctx("f")
    m.prepare_store([K[1]], f)
    assert policy.target_t1_size == 1
    accounting(m)


def test_events_replay_to_served_keys() -> None:
    m = CPUOffloadingManager(2, enable_events=True)
    replica: set[OffloadKey] = set()
    stored(m, K[:2])
    replica = replay_events(m.take_events(), replica)
    assert replica == served(m)
    stored(m, [K[2]], ctx("x"))
    c = ctx("y")
    out = m.prepare_store([K[3]], c)
    assert out is not None
    m.complete_store([K[3]], c, success=False)
    replica = replay_events(m.take_events(), replica)
    assert replica == served(m) and len(replica) == 1


def test_lru_finish_commits_recency() -> None:
    m = CPUOffloadingManager(2)
    early, late = ctx("early"), ctx("late")
    stored(m, [K[0]], early)  # ranked at the early request's provisional rank
    stored(m, [K[1]], late)
    m.on_request_finished(early)  # committed: now more recent than the running late request
    out = m.prepare_store([K[2]], ctx("n"))
    assert out is not None and out.evicted_keys == [K[1]]
