"""``python -m benchmarks.v1_pool_speed``: the bundled v1 ``BlockPool`` against vLLM 0.34.0's
(``--against 0.33.0``: that release's) on one engine-like trace, as per-operation time ratios
(upstream / ours) in one process.

The trace (prefix hits over shared system prompts, chunked prefill, decode, frees in reverse,
eviction under memory pressure) is generated once by driving the bundled pool, recorded as calls
naming blocks by id, and replayed on fresh pools of both kinds; each replay is timed per call
kind (``time.perf_counter_ns`` around each call, the same overhead for both), best of
``--repeat`` rounds. Per-call timing adds ~150 ns to every call of both pools (pulling ratios
towards 1): the ``net`` column and ``total, net of loop`` subtract the same loop's time on a pool
whose methods return at once (per call kind, best of the same rounds), and ``trace (one
clock)`` times each whole replay under one clock (noisier on a loaded machine: one preemption
lands in it). Each fresh pool answers ``get_usage`` once before it is timed (see ``_fresh``).
Request hashing happens during generation and is not timed. Upstream's pool is loaded from the
cached wheel without torch (:func:`properties.families.v1.upstream.load_vllm_v1`); without the
wheel only the bundled pool is timed.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import random
import time
from collections.abc import Callable
from typing import Any

from prefixcache.v1.core.block_pool import BlockPool
from prefixcache.v1.core.kv_cache_utils import get_request_block_hasher
from prefixcache.v1.hashing import sha256

__all__ = ["Call", "Ids", "generate", "main", "replay", "replay_whole"]


class Ids(list[int]):
    """A call argument naming a list of the pool's blocks by id."""


#: ``(method name, args)``; an ``Ids`` arg names blocks by id.
Call = tuple[str, tuple[Any, ...]]


class _Request:
    """Duck-typed request: tokens and their block hashes, extended as tokens arrive."""

    def __init__(self, tokens: list[int], block_size: int) -> None:
        self.all_token_ids = tokens
        self.block_hashes: list[Any] = []
        self.mm_features: list[Any] = []
        self.lora_request = None
        self.cache_salt = None
        self.prompt_embeds = None
        self._hasher = get_request_block_hasher(block_size, sha256)
        self.block_hashes.extend(self._hasher(self))

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    def append(self, tokens: list[int]) -> None:
        self.all_token_ids.extend(tokens)
        self.block_hashes.extend(self._hasher(self))


def generate(
    seed: int = 0, num_requests: int = 400, block_size: int = 16, num_blocks: int = 1024
) -> tuple[list[Call], list[_Request]]:
    """Drive a bundled pool like a scheduler would and record every pool call."""
    rng = random.Random(seed)
    pool = BlockPool(num_blocks, enable_caching=True, hash_block_size=block_size)
    prompts = [[rng.randrange(32000) for _ in range(rng.randrange(64, 512))] for _ in range(8)]
    calls: list[Call] = []
    requests: list[_Request] = []
    running: list[tuple[int, list[int], int]] = []  # (request index, block ids, cached count)

    def record(name: str, *args: Any) -> Any:
        calls.append((name, args))
        real = [[pool.blocks[i] for i in a] if isinstance(a, Ids) else a for a in args]
        return getattr(pool, name)(*real)

    for step in range(num_requests * 3):
        if len(requests) < num_requests and rng.random() < 0.4:
            tokens = list(rng.choice(prompts)) + [
                rng.randrange(32000) for _ in range(rng.randrange(1, 200))
            ]
            req = _Request(tokens, block_size)
            hits: list[int] = []
            for block_hash in req.block_hashes[: (len(tokens) - 1) // block_size]:
                found = record("get_cached_block", block_hash, [0])
                if found is None:
                    break
                hits.append(found[0].block_id)
            needed = -(-len(tokens) // block_size) - len(hits)
            if needed + len(hits) <= pool.get_num_free_blocks():
                record("touch", Ids(hits))
                got = record("get_new_blocks", needed)
                ids = hits + [b.block_id for b in got]
                full = len(tokens) // block_size
                record("cache_full_blocks", req, Ids(ids), len(hits), full, block_size, 0)
                requests.append(req)
                running.append((len(requests) - 1, ids, full))
        elif running:
            index = rng.randrange(len(running))
            req_index, ids, cached = running[index]
            req = requests[req_index]
            if rng.random() < 0.15 or pool.get_num_free_blocks() < 4:
                record("free_blocks", Ids(reversed(ids)))
                running.pop(index)
                continue
            req.append([rng.randrange(32000) for _ in range(rng.randrange(1, 16))])
            needed = -(-len(req.all_token_ids) // block_size) - len(ids)
            if needed > 0:
                ids += [b.block_id for b in record("get_new_blocks", needed)]
            full = len(req.all_token_ids) // block_size
            if full > cached:
                record("cache_full_blocks", req, Ids(ids), cached, full, block_size, 0)
            running[index] = (req_index, ids, max(cached, full))
        if step % 97 == 96:  # not the replay's first call, which pays the replay's start
            record("get_usage")
    for _, ids, _ in running:
        record("free_blocks", Ids(reversed(ids)))
    return calls, requests


def _fresh(make_pool: Callable[[], Any]) -> Any:
    """A fresh pool that has answered ``get_usage`` (the trace's one query without side effects)
    once: an instance's first call of it costs ~1 us more on both pools, which a long-lived
    engine pool pays once and which swamps a call kind the trace makes only a dozen times."""
    pool = make_pool()
    pool.get_usage()
    return pool


def replay(make_pool: Callable[[], Any], calls: list[Call]) -> dict[str, int]:
    """Nanoseconds per call kind for one replay on a fresh pool."""
    pool = _fresh(make_pool)
    bound: list[tuple[str, Callable[..., Any], list[Any]]] = []
    for name, args in calls:
        real = [[pool.blocks[i] for i in a] if isinstance(a, Ids) else a for a in args]
        bound.append((name, getattr(pool, name), real))
    totals: dict[str, int] = {}
    clock = time.perf_counter_ns
    gc.disable()
    try:
        for name, method, real in bound:
            start = clock()
            method(*real)
            totals[name] = totals.get(name, 0) + clock() - start
    finally:
        gc.enable()
    return totals


def replay_whole(make_pool: Callable[[], Any], calls: list[Call]) -> int:
    """Nanoseconds for one whole replay on a fresh pool, under one clock (no per-call timing
    overhead, which dilutes the per-kind ratios towards 1)."""
    pool = _fresh(make_pool)
    bound = [(getattr(pool, name), [[pool.blocks[i] for i in a] if isinstance(a, Ids) else a
                                    for a in args]) for name, args in calls]
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for method, real in bound:
            method(*real)
        return time.perf_counter_ns() - start
    finally:
        gc.enable()


class _NoOpPool:
    """Every call returns at once: replaying the trace on it measures the timing loop's own
    cost per call kind (the clock, the call), which the ``net`` row subtracts."""

    def __init__(self, num_blocks: int) -> None:
        self.blocks = list(range(num_blocks))

    def __getattr__(self, name: str) -> Callable[..., None]:
        return _no_op


def _no_op(*args: Any) -> None:
    return None


def _net(per: list[float], loop: float) -> str:
    """The ratio of ``per`` (ns per call, bundled then upstream) once the timing loop's own
    ``loop`` ns per call are taken from both; ``-`` when the bundled call is not above it."""
    ours, theirs = per[0] - loop, per[1] - loop
    return f"{theirs / ours:.2f}" if ours > 0 else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--against", default="0.34.0", help="the vLLM release to compare with")
    options = parser.parse_args(argv)
    calls, _ = generate(num_requests=options.requests)
    num_blocks, block_size = 1024, 16
    makers: dict[str, Callable[[], Any]] = {
        "bundled": lambda: BlockPool(num_blocks, True, block_size),
    }
    loader = importlib.import_module("properties.families.v1.upstream")
    wheel = loader.cached_wheel(options.against)
    if wheel is not None:
        upstream = loader.load_vllm_v1(version=options.against)
        makers[f"vllm {options.against}"] = lambda: upstream.block_pool.BlockPool(
            num_blocks, True, block_size)
    best: dict[str, dict[str, int]] = {}
    whole: dict[str, int] = {}
    floor: dict[str, int] = {}
    for _ in range(options.repeat):
        for kind, ns in replay(lambda: _NoOpPool(num_blocks), calls).items():
            floor[kind] = min(floor.get(kind, ns), ns)
        for label, make in makers.items():
            got = replay(make, calls)
            mine = best.setdefault(label, got)
            for kind, ns in got.items():
                mine[kind] = min(mine[kind], ns)
            ns = replay_whole(make, calls)
            whole[label] = min(whole.get(label, ns), ns)
    counts: dict[str, int] = {}
    for name, _args in calls:
        counts[name] = counts.get(name, 0) + 1
    print(f"{len(calls)} calls, best of {options.repeat}; ns per call")
    header = f"{'call':<20}{'count':>8}" + "".join(f"{label:>14}" for label in makers)
    print(header + (f"{'ratio':>8}{'net':>8}" if len(makers) == 2 else ""))
    for kind in [*sorted(counts), "total"]:
        count = sum(counts.values()) if kind == "total" else counts[kind]
        per = [(sum(b.values()) if kind == "total" else b[kind]) / count for b in best.values()]
        loop = (sum(floor.values()) if kind == "total" else floor[kind]) / count
        row = f"{kind:<20}{count:>8}" + "".join(f"{ns:>14.0f}" for ns in per)
        print(row + (f"{per[1] / per[0]:>8.2f}{_net(per, loop):>8}" if len(per) == 2 else ""))
    per = [(sum(b.values()) - sum(floor.values())) / len(calls) for b in best.values()]
    row = f"{'total, net of loop':<20}{len(calls):>8}" + "".join(f"{ns:>14.0f}" for ns in per)
    print(row + (f"{per[1] / per[0]:>8.2f}" if len(per) == 2 else ""))
    per = [whole[label] / len(calls) for label in makers]
    row = f"{'trace (one clock)':<20}{len(calls):>8}" + "".join(f"{ns:>14.0f}" for ns in per)
    print(row + (f"{per[1] / per[0]:>8.2f}" if len(per) == 2 else ""))
    if wheel is None:
        print(f"vllm {options.against} wheel not cached: `{loader.FETCH_COMMAND} --version "
              f"{options.against}` to compare")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
