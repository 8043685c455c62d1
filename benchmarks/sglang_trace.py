"""``python -m benchmarks.sglang_trace``: the bundled SGLang ``RadixCache`` against SGLang
0.5.23's ``UnifiedRadixCache`` (Python and Rust tree cores) and classic ``RadixCache`` on one
seeded request trace, in one process, as time ratios (upstream / bundled).

The trace: requests over a few shared system prompts and multi-turn conversations (a turn
extends an earlier request's full sequence), with decode lengths drawn up front. A scheduler
loop drives each cache the same way: admit (``match_prefix``, lock the matched node, allocate
the rest, evicting the shortfall first), and when the running batch is full finish the oldest
(``insert`` of prompt + output with the match as ``prev_prefix_len``, unlock, free the
unaligned tail). Each cache runs with its native types: the bundled one with lists of ints,
upstream with int64 tensors and ``array('q')`` keys, as SGLang's scheduler hands them over. The
loop is identical, so the ratio is the caches' (and their allocators') cost. The matched-token
totals are printed to show all four did the same work. Best of ``--repeat`` rounds.
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from array import array
from collections.abc import Callable
from typing import Any

from prefixcache.sglang.srt.mem_cache.allocator import (
    PagedTokenToKVPoolAllocator,
    TokenToKVPoolAllocator,
)
from prefixcache.sglang.srt.mem_cache.base_prefix_cache import (
    EvictParams,
    InsertParams,
    MatchPrefixParams,
)
from prefixcache.sglang.srt.mem_cache.cache_init_params import CacheInitParams
from prefixcache.sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey
from properties.families.sglang import upstream as sgl

__all__ = ["Request", "main", "make_trace", "run_bundled", "run_upstream"]

Request = tuple[list[int], str | None]  # full sequence (prompt + output), namespace; and:
# the prompt length is carried separately in the trace.


def make_trace(seed: int, requests: int) -> list[tuple[list[int], int, str | None]]:
    """(prompt + output tokens, prompt length, extra_key) per request, seeded."""
    rng = random.Random(seed)
    systems = [[rng.randrange(32000) for _ in range(rng.randrange(200, 900))] for _ in range(8)]
    history: list[list[int]] = []
    trace: list[tuple[list[int], int, str | None]] = []
    for _ in range(requests):
        if history and rng.random() < 0.35:
            base = list(rng.choice(history))  # next turn of a conversation
        else:
            base = list(rng.choice(systems))
        prompt = base + [rng.randrange(32000) for _ in range(rng.randrange(20, 200))]
        output = [rng.randrange(32000) for _ in range(rng.randrange(10, 120))]
        namespace = "lora-1" if rng.random() < 0.1 else None
        full = prompt + output
        history.append(full)
        if len(history) > 64:
            history.pop(0)
        trace.append((full, len(prompt), namespace))
    return trace


def run_bundled(trace: list[tuple[list[int], int, str | None]], pool: int, page: int,
                batch: int) -> int:
    """Drive the bundled cache; returns the matched tokens (the work check)."""
    alloc = (TokenToKVPoolAllocator(pool) if page == 1
             else PagedTokenToKVPoolAllocator(pool, page))
    cache = RadixCache(CacheInitParams(False, None, alloc, page))
    running: list[tuple[list[int], str | None, list[int], int, Any]] = []
    hits = 0

    def finish() -> None:
        full, ns, slots, matched, lock = running.pop(0)
        aligned = len(full) // page * page
        cache.insert(InsertParams(RadixKey(full, ns), slots, prev_prefix_len=matched))
        cache.unlock(lock)
        if aligned < len(slots):
            alloc.free(slots[aligned:])

    for full, prompt_len, ns in trace:
        if len(running) >= batch:
            finish()
        m = cache.match_prefix(MatchPrefixParams(RadixKey(full[:prompt_len], ns)))
        hits += m.device_prefix_len
        lock = cache.lock(m.last_device_node)
        need = -(-(len(full) - m.device_prefix_len) // page) * page
        while alloc.available_size() < need and running:
            cache.evict(EvictParams(need - alloc.available_size()))
            if alloc.available_size() < need:
                finish()
        fresh = alloc.alloc(need)
        if fresh is None:
            cache.unlock(lock)
            continue
        running.append((full, ns, m.device_indices + fresh, m.device_prefix_len, lock))
    while running:
        finish()
    return hits


def run_upstream(mods: sgl.SGLangModules, kind: str,
                 trace: list[tuple[list[int], int, str | None]], pool: int, page: int,
                 batch: int) -> int:
    """The same loop on upstream's cache ("classic", "unified-python", "unified-rust")."""
    import torch

    alloc = mods.new_allocator(pool, page)
    if kind == "classic":
        cache = mods.new_radix_cache(alloc, page)
    else:
        cache = mods.new_unified(alloc, page, core=kind.split("-")[1])
    base = mods.base
    key_cls = mods.radix_cache.RadixKey
    match_params, insert_params, evict_params = (base.MatchPrefixParams, base.InsertParams,
                                                 base.EvictParams)
    classic = kind == "classic"
    running: list[tuple[array[int], str | None, Any, int, Any]] = []
    hits = 0

    def finish() -> None:
        full, ns, slots, matched, lock = running.pop(0)
        aligned = len(full) // page * page
        result = cache.insert(insert_params(key=key_cls(full, ns), value=slots[:aligned],
                                            prev_prefix_len=matched))
        if classic and result.prefix_len > matched:  # the caller frees the duplicates
            alloc.free(slots[matched:result.prefix_len])
        cache.unlock(lock)
        if aligned < len(slots):
            alloc.free(slots[aligned:])

    for tokens, prompt_len, ns in trace:
        full = array("q", tokens)
        if len(running) >= batch:
            finish()
        m = cache.match_prefix(match_params(key=key_cls(full[:prompt_len], ns)))
        matched = int(m.device_prefix_len)
        hits += matched
        node = m.last_device_node
        lock = cache.lock(node)
        need = -(-(len(full) - matched) // page) * page
        while alloc.available_size() < need and running:
            cache.evict(evict_params(num_tokens=need - alloc.available_size()))
            if alloc.available_size() < need:
                finish()
        fresh = alloc.alloc(need)
        if fresh is None:
            cache.unlock(lock)
            continue
        prefix = cache.path_device_indices(node)[:matched]
        running.append((full, ns, torch.cat((prefix, fresh)), matched, lock))
    while running:
        finish()
    return hits


def _best(run: Callable[[], int], repeat: int) -> tuple[float, int]:
    best, hits = float("inf"), 0
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        hits = run()
        best = min(best, time.perf_counter() - start)
    return best, hits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sglang_trace")
    parser.add_argument("--seed", type=int, default=20251206)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--pool", type=int, default=40000, help="KV slots (evicts when full)")
    parser.add_argument("--page-size", type=int, default=1)
    parser.add_argument("--batch", type=int, default=16, help="running requests")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    trace = make_trace(args.seed, args.requests)
    tokens = sum(len(full) for full, _, _ in trace)
    print(f"trace: {len(trace)} requests, {tokens} tokens, pool {args.pool}, page "
          f"{args.page_size}, batch {args.batch}, seed {args.seed}, best of {args.repeat}")
    ours, hits = _best(lambda: run_bundled(trace, args.pool, args.page_size, args.batch),
                       args.repeat)
    print(f"{'bundled RadixCache':32} {ours * 1000:9.1f} ms  matched {hits:8d}  ratio 1.00")
    if sgl.cached_wheel(sgl.DEFAULT_VERSION) is None:
        print(f"upstream: no sglang wheel cached (`{sgl.FETCH_COMMAND}`)")
        return 0
    mods = sgl.load_sglang()
    for kind in ("unified-python", "unified-rust", "classic"):
        if kind == "unified-rust" and not mods.rust_core:
            print(f"{kind}: not loaded ({mods.rust_error})")
            continue
        secs, their_hits = _best(lambda k=kind: run_upstream(  # type: ignore[misc]
            mods, k, trace, args.pool, args.page_size, args.batch), args.repeat)
        print(f"{'sglang ' + mods.version + ' ' + kind:32} {secs * 1000:9.1f} ms  matched "
              f"{their_hits:8d}  ratio {secs / ours:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
