"""Differential test: the bundled CPU offload manager against upstream's (0.34.0, 0.33.0),
both policies, over generated operation sequences; what both report must agree (lookup
results, store outcomes with evicted keys and chunk ids, load chunk ids, events), and each
side's promises are checked on the way (see :mod:`tests.offload.harness`).

Known design differences are kept out of the comparison, each documented where it is: the
bundled tier announces a reset's removals (upstream does not); 0.33.0 counts a key toward
``store_threshold`` on every offer of one request (0.34.0 once), so 0.33.0 is compared at
threshold 1 (the difference itself is pinned in ``test_upstream_differences``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from properties.families.offload import upstream as up
from tests.offload import harness as h

VERSIONS = ("0.34.0", "0.33.0")
PER_REQUEST = ("store", "store_now", "load", "load_now", "lookup", "finish")


def _mods(version: str) -> up.OffloadModules:
    if up.cached_wheel(version) is None:
        pytest.skip(f"no vllm {version} wheel cached: run `{up.FETCH_COMMAND} --version "
                    f"{version}`")
    return up.load_vllm_offload(version=version)


keys = st.lists(st.integers(0, h.NUM_KEYS - 1), min_size=1, max_size=3, unique=True)
req = st.integers(0, 2)
store_now = st.tuples(st.just("store_now"), req, keys)
finish = st.tuples(st.just("finish"), req)
load_and_release = st.tuples(st.just("load_now"), req, keys)
operation = st.one_of(
    store_now, store_now, store_now, store_now, finish, finish, load_and_release,
    load_and_release,
    st.tuples(st.just("store"), req, keys),
    st.tuples(st.just("complete_store"), st.integers(0, 7), st.booleans()),
    st.tuples(st.just("load"), req, keys),
    st.tuples(st.just("complete_load"), st.integers(0, 7)),
    st.tuples(st.just("lookup"), req, st.integers(0, h.NUM_KEYS - 1)),
    st.tuples(st.just("new"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("events")),
    st.tuples(st.just("reset")),
)
config = st.tuples(st.integers(2, 6), st.sampled_from([1, 1, 1, 2]),
                   st.sampled_from([2, 4, 64_000]))


def _run(version: str, policy: str, cfg: tuple[int, int, int],
         ops: list[tuple[Any, ...]]) -> None:
    mods = _mods(version)
    num_chunks, threshold, tracker = cfg
    if version == "0.33.0":
        threshold = 1
    upstream = h.Side(f"vllm {version}", up.new_manager(
        mods, num_chunks, cache_policy=policy, store_threshold=threshold,
        max_tracker_size=tracker), mods.types, bundled=False)
    pair = h.new_pair(upstream, num_chunks, policy, threshold, tracker)
    pair.trace.append(f"config chunks={num_chunks} policy={policy} threshold={threshold} "
                      f"tracker={tracker}")
    # Requests that finished are replaced by fresh ids so a sequence keeps exercising.
    for name, *args in ops:
        if name in PER_REQUEST and args[0] in pair.finished:
            args[0] += 10 * (1 + len(pair.finished))
        h.OPS[name](pair, *args)
        h.check(pair)
    h.op_events(pair)


@pytest.mark.parametrize("policy", ["lru", "arc"])
@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=500, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(cfg=config, ops=st.lists(operation, min_size=10, max_size=60))
def test_bundled_agrees_with_upstream(version: str, policy: str, cfg: tuple[int, int, int],
                                      ops: list[tuple[Any, ...]]) -> None:
    _run(version, policy, cfg, ops)


def _broken_commit(policy: Any, *args: Any) -> None:
    """A broken LRU: finishing a request commits nothing."""


@pytest.mark.parametrize("breakage", ["no-commit", "offer-not-protected"])
def test_differential_catches_a_broken_manager(breakage: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from prefixcache.v1.kv_offload.cpu.policies import lru

    if breakage == "no-commit":
        monkeypatch.setattr(lru.LRUCachePolicy, "on_request_finished", _broken_commit)
        ops = [("store_now", 0, [0]), ("store_now", 1, [1]), ("finish", 0),
               ("store_now", 2, [2])]
    else:
        evict = lru.LRUCachePolicy.evict
        monkeypatch.setattr(lru.LRUCachePolicy, "evict",
                            lambda self, n, protected: evict(self, n, set()))
        # Key 1 is the LRU; the offer naming it comes from a request without positions, so
        # the access does not refresh it: only the offer's protection keeps it.
        ops = [("store_now", 0, [1]), ("finish", 0), ("store_now", 2, [0]), ("finish", 2),
               ("new", 3, False), ("store_now", 3, [1, 2])]
    with pytest.raises(AssertionError):
        _run("0.34.0", "lru", (2, 1, 64_000), ops)
