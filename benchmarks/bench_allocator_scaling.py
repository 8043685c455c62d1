"""Per-operation cost of the reference allocator as the pool grows.

Measures allocate (mutable; immutable miss; immutable hit on an active id; immutable hit
reviving an evictable id), free (hashless and cached), evict (an allocation that must
evict, with out-of-order access times), ``get_physical_block_id``, fork (8-block chain)
and swap (8-block sequence GPU->CPU or back) at several pool sizes, each the best of
several repeats timed with ``time.perf_counter_ns``, and prints each size's time as a
ratio of the smallest size's time measured in the same process.

Run: ``python -m benchmarks.bench_allocator_scaling [--sizes 1024 4096 ...]``.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from benchmarks.compiled import clean_heap, no_gc
from prefixcache import (
    BlockTable,
    CpuGpuBlockAllocator,
    Device,
    PrefixCachingBlockAllocator,
)
from prefixcache.interfaces import Block

BLOCK_SIZE = 16
CHAIN = 8

#: The timed operations of one run use at most 1/MAX_POOL_SHARE of the smallest pool, so
#: every size is measured in the same regime: a run that drains (evicts or revives every
#: block of) or fills the smallest pool measures something else there than on larger ones.
MAX_POOL_SHARE = 4

# A timed step: given the pool size, do the setup, then return (run, ops) where ``run``
# performs ``ops`` operations and is the only part timed.
Step = Callable[[int, int], tuple[Callable[[], None], int]]


def _tokens(seed: int) -> list[int]:
    return [seed * BLOCK_SIZE + i for i in range(BLOCK_SIZE)]


def _filled_evictor(
    num_blocks: int, rng: random.Random, shuffled: bool = True
) -> PrefixCachingBlockAllocator:
    """Every id cached and evictable, with access times in random (or id) order."""
    alloc = PrefixCachingBlockAllocator(num_blocks, BLOCK_SIZE)
    blocks = [alloc.allocate_immutable_block(None, _tokens(i)) for i in range(num_blocks)]
    times = list(range(num_blocks))
    if shuffled:
        rng.shuffle(times)
    for block, t in zip(blocks, times, strict=True):
        alloc.mark_blocks_as_accessed([block.block_id], float(t))  # type: ignore[list-item]
        alloc.free(block)
    alloc.mark_blocks_as_computed([])  # as the engine does after each scheduling step
    return alloc


def step_allocate_mutable(n: int, k: int) -> tuple[Callable[[], None], int]:
    alloc = PrefixCachingBlockAllocator(n, BLOCK_SIZE)

    def run() -> None:
        for _ in range(k):
            alloc.allocate_mutable_block(None)

    return run, k


def step_free_hashless(n: int, k: int) -> tuple[Callable[[], None], int]:
    alloc = PrefixCachingBlockAllocator(n, BLOCK_SIZE)
    blocks = [alloc.allocate_mutable_block(None) for _ in range(k)]

    def run() -> None:
        for block in blocks:
            alloc.free(block)

    return run, k


def step_allocate_immutable_miss(n: int, k: int) -> tuple[Callable[[], None], int]:
    alloc = PrefixCachingBlockAllocator(n, BLOCK_SIZE)
    chunks = [_tokens(i) for i in range(k)]

    def run() -> None:
        for tokens in chunks:
            alloc.allocate_immutable_block(None, tokens)

    return run, k


def step_allocate_immutable_hit_active(n: int, k: int) -> tuple[Callable[[], None], int]:
    alloc = PrefixCachingBlockAllocator(n, BLOCK_SIZE)
    for i in range(n // 2):  # a populated cache
        alloc.allocate_immutable_block(None, _tokens(i))
    tokens = _tokens(0)

    def run() -> None:
        for _ in range(k):
            alloc.allocate_immutable_block(None, tokens)

    return run, k


def step_allocate_immutable_hit_evictable(n: int, k: int) -> tuple[Callable[[], None], int]:
    alloc = _filled_evictor(n, random.Random(n))
    chunks = [_tokens(i) for i in range(k)]

    def run() -> None:
        for tokens in chunks:
            alloc.allocate_immutable_block(None, tokens)

    return run, k


def step_free_cached(n: int, k: int) -> tuple[Callable[[], None], int]:
    alloc = PrefixCachingBlockAllocator(n, BLOCK_SIZE)
    blocks = [alloc.allocate_immutable_block(None, _tokens(i)) for i in range(n)]
    rng = random.Random(n)
    for block in blocks:
        alloc.mark_blocks_as_accessed([block.block_id], float(rng.randrange(n)))  # type: ignore[list-item]
    for block in blocks[k:]:  # the evictor is large when the timed frees run
        alloc.free(block)
    timed = blocks[:k]

    def run() -> None:
        for block in timed:
            alloc.free(block)

    return run, k


def step_evict(n: int, k: int) -> tuple[Callable[[], None], int]:
    alloc = _filled_evictor(n, random.Random(n), shuffled=True)

    def run() -> None:
        for _ in range(k):
            alloc.allocate_mutable_block(None)

    return run, k


def step_evict_in_order(n: int, k: int) -> tuple[Callable[[], None], int]:
    alloc = _filled_evictor(n, random.Random(n), shuffled=False)

    def run() -> None:
        for _ in range(k):
            alloc.allocate_mutable_block(None)

    return run, k


def step_physical_block_id(n: int, k: int) -> tuple[Callable[[], None], int]:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", n, n, BLOCK_SIZE)
    rng = random.Random(n)
    ids = [rng.randrange(n, 2 * n) for _ in range(k)]

    def run() -> None:
        for block_id in ids:
            alloc.get_physical_block_id(Device.CPU, block_id)

    return run, k


def step_fork(n: int, k: int) -> tuple[Callable[[], None], int]:
    alloc = PrefixCachingBlockAllocator(n, BLOCK_SIZE)
    for i in range(n // 2):
        alloc.allocate_immutable_block(None, _tokens(i))
    chain: list[Block] = alloc.allocate_immutable_blocks(
        None, [_tokens(n + i) for i in range(CHAIN)]
    )
    last = chain[-1]

    def run() -> None:
        for _ in range(k):
            alloc.fork(last)

    return run, k


def step_swap(n: int, k: int) -> tuple[Callable[[], None], int]:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", n, n, BLOCK_SIZE)
    for i in range(n // 2):  # both caches populated
        alloc.allocate_immutable_block(None, _tokens(i), Device.GPU)
        alloc.allocate_immutable_block(None, _tokens(i), Device.CPU)
    table = BlockTable(BLOCK_SIZE, alloc)
    table.allocate([n * BLOCK_SIZE + i for i in range(CHAIN * BLOCK_SIZE - 3)])
    rounds = max(1, k // 2)

    def run() -> None:
        for _ in range(rounds):
            alloc.swap(table.blocks, Device.GPU, Device.CPU)
            alloc.swap(table.blocks, Device.CPU, Device.GPU)

    return run, 2 * rounds


STEPS: dict[str, Step] = {
    "allocate mutable": step_allocate_mutable,
    "allocate immutable (miss)": step_allocate_immutable_miss,
    "allocate immutable (hit, active)": step_allocate_immutable_hit_active,
    "allocate immutable (hit, evictable)": step_allocate_immutable_hit_evictable,
    "free (hashless)": step_free_hashless,
    "free (cached -> evictor)": step_free_cached,
    "evict (times out of order)": step_evict,
    "evict (times in order)": step_evict_in_order,
    "get_physical_block_id": step_physical_block_id,
    f"fork ({CHAIN}-block chain)": step_fork,
    f"swap ({CHAIN}-block sequence)": step_swap,
}


def measure(step: Step, sizes: list[int], ops: int, repeats: int) -> list[float]:
    """Best-of-``repeats`` nanoseconds per operation at each size.

    Repeats are interleaved across sizes (size order rotating each round) after one
    warm-up round, so drift in machine speed hits every size alike; each run gets a
    fresh setup and runs with the garbage collector off.
    """
    best = [float("inf")] * len(sizes)
    for round_ in range(repeats + 1):
        order = list(range(len(sizes)))
        shift = round_ % len(sizes)
        order = order[shift:] + order[:shift]
        for index in order:
            run, count = step(sizes[index], ops)
            clean_heap()
            with no_gc():
                start = time.perf_counter_ns()
                run()
                elapsed = time.perf_counter_ns() - start
            if round_:  # round 0 is the warm-up
                best[index] = min(best[index], elapsed / count)
    return best


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    parser.add_argument("--ops", type=int, default=512, help="operations per repeat")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    sizes: list[int] = args.sizes
    ops = max(1, min(args.ops, min(sizes) // MAX_POOL_SHARE))
    results: dict[str, list[float]] = {}
    for name, step in STEPS.items():
        results[name] = measure(step, sizes, ops, args.repeats)

    label = max(len(name) for name in results)
    header = f"{'operation':<{label}}  {'ns/op @' + str(sizes[0]):>12}" + "".join(
        f"  {'x @' + str(size):>9}" for size in sizes[1:]
    )
    print(header)
    print("-" * len(header))
    for name, times in results.items():
        base = times[0]
        ratios = "".join(f"  {t / base:>9.2f}" for t in times[1:])
        print(f"{name:<{label}}  {base:>12.0f}{ratios}")
    worst = max(t[-1] / t[0] for t in results.values())
    print(f"\nworst ratio {sizes[-1]} vs {sizes[0]} blocks: {worst:.2f}x (target "
          "<= 1.3x; `python -m benchmarks --sections scaling` adds the memory baseline)")
    return results


if __name__ == "__main__":
    main()
