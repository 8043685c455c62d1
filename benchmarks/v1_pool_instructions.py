"""``python -m benchmarks.v1_pool_instructions``: the trace of :mod:`benchmarks.v1_pool_speed`
counted in CPU instructions per call kind, the bundled v1 ``BlockPool`` against vLLM 0.34.0's
(``--against 0.33.0``: that release's).

Time ratios on a loaded two-core machine swing by 1.5x between runs; instruction counts do
not. For each pool and call kind one process replays the whole trace on a fresh pool under
``valgrind --tool=callgrind --collect-atstart=no --toggle-collect=_operator_call``, making
that kind's calls (``all``: every call) through ``operator.call``, so only those calls (the
call itself, its frame, the pool's work) are counted. Reported: instructions per call and the
ratio of the second pool to the first (upstream / bundled). ``--pools loop`` counts a pool whose
methods return at once: the call's own cost, which no pool can go below. Instructions are not
time (cache misses cost more per instruction), so this complements the timed table; it does not
replace it.

    python -m benchmarks.v1_pool_instructions [--kinds touch all] [--pools bundled vllm]

About 15 s per (pool, kind) on one core; the runs go two at a time.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from benchmarks.instructions import ROOT, collected

__all__ = ["KINDS", "count", "main"]

#: The trace's call kinds, and ``all`` (every call).
KINDS = ("cache_full_blocks", "free_blocks", "get_cached_block", "get_new_blocks", "get_usage",
         "touch", "all")

#: The counted process: the trace generated, a fresh pool built, each call bound, the chosen
#: kind's calls made through ``operator.call`` (the only function callgrind collects).
_SCRIPT = """
import gc, importlib, operator
from benchmarks.v1_pool_speed import Ids, generate
from prefixcache.v1.core.block_pool import BlockPool
calls, _ = generate()
if {pool!r} == "bundled":
    make = lambda: BlockPool(1024, True, 16)
elif {pool!r} == "loop":
    from benchmarks.v1_pool_speed import _NoOpPool
    make = lambda: _NoOpPool(1024)
else:
    upstream = importlib.import_module("properties.families.v1.upstream").load_vllm_v1(
        version={pool!r})
    make = lambda: upstream.block_pool.BlockPool(1024, True, 16)
pool = make()
bound = [(name, getattr(pool, name), [[pool.blocks[i] for i in a] if isinstance(a, Ids) else a
                                      for a in args]) for name, args in calls]
kind = {kind!r}
counted = 0
call = operator.call
gc.collect()
gc.disable()
for name, method, real in bound:
    if kind == "all" or name == kind:
        call(method, *real)
        counted += 1
    else:
        method(*real)
print("calls", counted)
"""


def count(pool: str, kind: str, python: str = sys.executable) -> tuple[int, int]:
    """``(instructions, calls)`` of ``kind``'s calls of the trace on ``pool`` (``bundled``,
    ``loop`` or a vLLM release)."""
    script = _SCRIPT.format(pool=pool, kind=kind)
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/callgrind.out",
             "--collect-atstart=no", "--toggle-collect=_operator_call", python, "-c", script],
            cwd=ROOT, capture_output=True, text=True, check=False,
            env={"PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        raise RuntimeError(f"counted run failed ({pool}, {kind}):\n{proc.stderr[-2000:]}")
    calls = int(proc.stdout.split("calls")[-1])
    return collected(proc.stderr), calls


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--against", default="0.34.0", help="the vLLM release to compare with")
    parser.add_argument("--pools", nargs="+", default=["bundled", "vllm"],
                        choices=["bundled", "vllm", "loop"],
                        help="loop: a pool whose methods return at once (the call's own cost)")
    options = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind not found: instruction counts need it", file=sys.stderr)
        return 2
    pools = [options.against if p == "vllm" else p for p in options.pools]
    jobs = [(pool, kind) for kind in options.kinds for pool in pools]
    with ThreadPoolExecutor(2) as executor:
        results = dict(zip(jobs, executor.map(lambda job: count(*job), jobs), strict=True))
    print("instructions per call (callgrind, only the counted kind's calls collected)")
    print(f"{'call':<20}{'count':>8}" + "".join(f"{p:>14}" for p in pools)
          + (f"{'ratio':>8}" if len(pools) >= 2 else ""))
    for kind in options.kinds:
        per = [results[(pool, kind)][0] / max(results[(pool, kind)][1], 1) for pool in pools]
        row = f"{kind:<20}{results[(pools[0], kind)][1]:>8}" + "".join(f"{n:>14,.0f}" for n in per)
        print(row + (f"{per[1] / per[0]:>8.2f}" if len(pools) >= 2 else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
