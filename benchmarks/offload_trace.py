"""``python -m benchmarks.offload_trace``: the bundled CPU offload manager against vLLM
0.34.0's ``CPUOffloadingManager`` (``lru`` and ``arc``) on one seeded, scheduler-like trace,
as time ratios (upstream / bundled) in one process.

The trace: requests share Zipf-popular system prompts (chains of chunk keys) and add their own
chunks; ``--concurrency`` requests run interleaved, step by step. A new request looks its keys
up head first until the first miss, loads the hits (completed a step later), then stores the
rest in batches of ``--batch`` keys whose writes complete a step later (1% fail); when its keys
are stored it finishes. The tier holds ``--chunks`` chunks, far fewer than the working set, so
most stores evict. The trace is generated once by driving the bundled manager (closed loop,
untimed) and recorded as calls; an untimed pass replays it on each upstream manager and checks
every lookup result and store outcome against the recording (the two must agree for the
timing to compare like with like); then each replay is timed as a whole (``perf_counter_ns``,
gc off) on fresh managers and contexts built outside the clock, for ``--repeat`` rounds. A
round times both managers back to back; the ratio reported is the median of the rounds'
ratios (robust to load on a shared machine), the seconds the best round of each.
Without the wheel only the bundled manager is timed.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from prefixcache.v1.kv_offload import base as ref_base
from prefixcache.v1.kv_offload.cpu.manager import CPUOffloadingManager
from properties.core.sources import UpstreamError

__all__ = ["generate", "main", "replay"]

NEW, LOOKUP, LOAD, DONE_LOAD, STORE, DONE_STORE, FAIL_STORE, FINISH = range(8)
# (op, request index, keys); LOOKUP and STORE carry the recorded outcome as a 4th field.
Call = tuple[int, int, tuple[bytes, ...], Any]


def _key(*parts: object) -> bytes:
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=16).digest()
    return bytes(ref_base.make_offload_key(digest, 0))


def generate(seed: int, requests: int, chunks: int, concurrency: int, batch: int,
             prompts: int, policy: str = "lru"
             ) -> tuple[list[Call], list[dict[bytes, int]], int]:
    """(calls, per-request key positions, num_chunks) recorded from the bundled manager."""
    rng = random.Random(seed)
    system = [[_key("sys", p, i) for i in range(rng.randint(8, 40))] for p in range(prompts)]
    weights = [1 / (rank + 1) for rank in range(prompts)]
    manager = CPUOffloadingManager(chunks, cache_policy=policy, enable_events=False)
    calls: list[Call] = []
    positions: list[dict[bytes, int]] = []
    contexts: list[ref_base.ReqContext] = []
    hit = ref_base.LookupResult.HIT

    def start(r: int) -> dict[str, Any]:
        prompt = rng.choices(range(prompts), weights)[0]
        keys = system[prompt] + [_key("own", r, i) for i in range(rng.randint(2, 24))]
        ctx = ref_base.ReqContext(req_id=f"r{r}")
        pos = {k: 16 * (i + 1) for i, k in enumerate(keys)}
        for k, p in pos.items():
            ctx.set_offload_key_position(ref_base.OffloadKey(k), p)
        positions.append(pos)
        contexts.append(ctx)
        manager.on_new_request(ctx)
        calls.append((NEW, r, (), None))
        looked: list[bytes] = []
        results = []
        for k in keys:
            res = manager.lookup(ref_base.OffloadKey(k), ctx)
            looked.append(k)
            results.append(res.name)
            if res is not hit:
                break
        calls.append((LOOKUP, r, tuple(looked), tuple(results)))
        hits = tuple(looked[:-1] if results[-1] != "HIT" else looked)
        if hits:
            manager.prepare_load([ref_base.OffloadKey(k) for k in hits], ctx)
            calls.append((LOAD, r, hits, None))
        return {"r": r, "keys": keys, "next": len(hits), "loading": hits, "writing": ()}

    def step(state: dict[str, Any]) -> bool:
        r, ctx = state["r"], contexts[state["r"]]
        if state["loading"]:
            manager.complete_load([ref_base.OffloadKey(k) for k in state["loading"]], ctx)
            calls.append((DONE_LOAD, r, state["loading"], None))
            state["loading"] = ()
        if state["writing"]:
            fail = rng.random() < 0.01
            manager.complete_store([ref_base.OffloadKey(k) for k in state["writing"]], ctx,
                                   success=not fail)
            calls.append((FAIL_STORE if fail else DONE_STORE, r, state["writing"], None))
            state["writing"] = ()
        if state["next"] >= len(state["keys"]):
            manager.on_request_finished(ctx)
            calls.append((FINISH, r, (), None))
            return False
        offer = tuple(state["keys"][state["next"]:state["next"] + batch])
        state["next"] += len(offer)
        out = manager.prepare_store([ref_base.OffloadKey(k) for k in offer], ctx)
        outcome = None if out is None else (tuple(out.keys_to_store), tuple(out.evicted_keys))
        calls.append((STORE, r, offer, outcome))
        if out is not None:
            state["writing"] = tuple(out.keys_to_store)
        return True

    active: list[dict[str, Any]] = []
    started = 0
    while started < requests or active:
        while len(active) < concurrency and started < requests:
            active.append(start(started))
            started += 1
        active = [state for state in active if step(state)]
    return calls, positions, chunks


def _contexts(types: Any, positions: Sequence[dict[bytes, int]]) -> list[Any]:
    out = []
    for r, pos in enumerate(positions):
        ctx = types.ReqContext(req_id=f"r{r}")
        for k, p in pos.items():
            ctx.set_offload_key_position(k, p)
        out.append(ctx)
    return out


def replay(manager: Any, contexts: Sequence[Any], calls: Sequence[Call]) -> None:
    """Apply the recorded calls (the timed loop: no checks)."""
    for op, r, keys, _ in calls:
        ctx = contexts[r]
        if op == LOOKUP:
            for k in keys:
                manager.lookup(k, ctx)
        elif op == STORE:
            manager.prepare_store(keys, ctx)
        elif op == DONE_STORE:
            manager.complete_store(keys, ctx)
        elif op == LOAD:
            manager.prepare_load(keys, ctx)
        elif op == DONE_LOAD:
            manager.complete_load(keys, ctx)
        elif op == NEW:
            manager.on_new_request(ctx)
        elif op == FINISH:
            manager.on_request_finished(ctx)
        else:
            manager.complete_store(keys, ctx, success=False)


def verify(manager: Any, contexts: Sequence[Any], calls: Sequence[Call]) -> int:
    """Replay with checks; the number of calls whose outcome differs from the recording."""
    mismatches = 0
    for op, r, keys, recorded in calls:
        ctx = contexts[r]
        if op == LOOKUP:
            mismatches += tuple(manager.lookup(k, ctx).name for k in keys) != recorded
        elif op == STORE:
            out = manager.prepare_store(keys, ctx)
            outcome = (None if out is None
                       else (tuple(out.keys_to_store), tuple(out.evicted_keys)))
            mismatches += outcome != recorded
        else:
            replay(manager, contexts, [(op, r, keys, recorded)])
    return mismatches


def _time(contenders: Sequence[tuple[Callable[[], Any], Any]],
          positions: Sequence[dict[bytes, int]], calls: Sequence[Call], repeat: int
          ) -> tuple[list[float], list[float]]:
    """(best replay seconds of each (build, types) contender, per-round ratios of each
    contender's time to the first's). A round times every contender back to back (order
    alternating between rounds), so its ratio compares runs under the same machine load."""
    best = [float("inf")] * len(contenders)
    ratios: list[list[float]] = [[] for _ in contenders]
    for round_no in range(repeat):
        order = list(range(len(contenders)))
        if round_no % 2:
            order.reverse()
        times = [0.0] * len(contenders)
        for i in order:
            build, types = contenders[i]
            manager, contexts = build(), _contexts(types, positions)
            gc.collect()
            gc.disable()
            try:
                start = time.perf_counter_ns()
                replay(manager, contexts, calls)
                times[i] = (time.perf_counter_ns() - start) / 1e9
            finally:
                gc.enable()
        for i, seconds in enumerate(times):
            best[i] = min(best[i], seconds)
            ratios[i].append(seconds / times[0])
    return best, [statistics.median(r) for r in ratios]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.offload_trace")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--chunks", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=96)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--version", default="0.34.0")
    args = parser.parse_args(argv)
    try:
        from properties.families.offload import upstream as up
        mods: up.OffloadModules | None = up.load_vllm_offload(version=args.version)
    except UpstreamError as exc:
        mods = None
        print(f"upstream not timed: {exc}")
    print(f"{'manager':<24}{'best s':>9}{'us/call':>9}{'upstream/bundled':>18}")
    for policy in ("lru", "arc"):
        calls, positions, chunks = generate(args.seed, args.requests, args.chunks,
                                            args.concurrency, args.batch, args.prompts, policy)
        stores = [c for c in calls if c[0] == STORE]
        evicting = sum(1 for c in stores if c[3] is not None and c[3][1])
        looked = sum(len(c[2]) for c in calls if c[0] == LOOKUP)
        hits = sum(c[3].count("HIT") for c in calls if c[0] == LOOKUP)
        print(f"{policy} trace: seed {args.seed}, {args.requests} requests, {len(calls)} calls, "
              f"{chunks} chunks; {len(stores)} stores ({evicting} evicting, "
              f"{sum(c[3] is None for c in stores)} refused), {looked} lookups ({hits} hits)")

        def ours(policy: str = policy, chunks: int = chunks) -> Any:
            return CPUOffloadingManager(chunks, cache_policy=policy)
        contenders: list[tuple[Callable[[], Any], Any]] = [(ours, ref_base)]
        if mods is not None:
            def theirs(policy: str = policy, chunks: int = chunks) -> Any:
                assert mods is not None
                return up.new_manager(mods, chunks, cache_policy=policy, enable_events=False)
            bad = verify(theirs(), _contexts(mods.types, positions), calls)
            print(f"  {mods.version} {policy}: outcomes differing from the recording: {bad}")
            contenders.append((theirs, mods.types))
        times, ratios = _time(contenders, positions, calls, args.repeat)
        print(f"{'bundled ' + policy:<24}{times[0]:>9.3f}{times[0] / len(calls) * 1e6:>9.2f}")
        if mods is not None:
            print(f"{mods.version + ' ' + policy:<24}{times[1]:>9.3f}"
                  f"{times[1] / len(calls) * 1e6:>9.2f}{ratios[1]:>17.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
