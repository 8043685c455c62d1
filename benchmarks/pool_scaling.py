"""How the bundled allocator's per-operation cost grows with the pool (1k to 64k blocks).

Two views, both as ratios to the smallest pool measured in the same process:

- the micro-benchmark steps of ``benchmarks.bench_allocator_scaling`` (each isolates one
  operation at a given pool size, with the pool filled where that matters), re-timed here with
  the CPU clock, repeats interleaved across sizes;
- the same serving trace replayed on pools of every size (GPU and CPU both ``N`` blocks): one
  program, so only the pool differs (larger pools evict less and hit more).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.bench_allocator_scaling import STEPS, Step
from benchmarks.compiled import CLOCK, CompiledProgram, clock_overhead_ns, merge_min, no_gc
from models.capabilities import Config

__all__ = ["ScalingResult", "measure_steps", "trace_scaling"]


@dataclass(frozen=True, slots=True)
class ScalingResult:
    """Nanoseconds per operation, ``ns[name][i]`` at ``sizes[i]``."""

    sizes: tuple[int, ...]
    ns: dict[str, list[float]]

    def ratios(self) -> dict[str, list[float]]:
        return {name: [t / times[0] if times[0] else float("inf") for t in times]
                for name, times in self.ns.items()}

    def worst(self) -> tuple[str, float]:
        """The operation whose cost grows most from the first to the last size."""
        name, ratios = max(self.ratios().items(), key=lambda kv: kv[1][-1])
        return name, ratios[-1]

    def as_dict(self) -> dict[str, Any]:
        worst, ratio = self.worst()
        return {"sizes": list(self.sizes), "ns_per_op": self.ns, "ratios": self.ratios(),
                "worst": {"operation": worst, "ratio": ratio}}


def _time_step(step: Step, size: int, ops: int) -> float:
    run, count = step(size, ops)
    with no_gc():
        start = CLOCK()
        run()
        elapsed = CLOCK() - start
    return elapsed / count


def measure_steps(sizes: Sequence[int], ops: int, repeats: int,
                  names: Sequence[str] | None = None) -> ScalingResult:
    """Best-of-``repeats`` CPU nanoseconds per operation for each micro-benchmark step, after
    one warm-up run on the smallest pool; the size order rotates every round so drift hits
    every size alike."""
    ops = min(ops, min(sizes))
    out: dict[str, list[float]] = {}
    for name, step in STEPS.items():
        if names is not None and name not in names:
            continue
        _time_step(step, sizes[0], ops)  # warm-up: first calls, lazy imports
        best = [float("inf")] * len(sizes)
        for round_ in range(repeats):
            shift = round_ % len(sizes)
            for index in [*range(shift, len(sizes)), *range(shift)]:
                best[index] = min(best[index], _time_step(step, sizes[index], ops))
        out[name] = best
    return ScalingResult(tuple(sizes), out)


def trace_scaling(program: CompiledProgram, sizes: Sequence[int], repeats: int,
                  ) -> ScalingResult:
    """Per-kind (and overall) CPU nanoseconds per operation of one compiled table program on
    pools of ``sizes`` blocks per device; repeats interleaved across sizes."""
    overhead = clock_overhead_ns()
    counts = program.counts()
    per_size: list[list[dict[str, float]]] = [[] for _ in sizes]
    for round_ in range(repeats):
        shift = round_ % len(sizes)
        for index in [*range(shift, len(sizes)), *range(shift)]:
            size = sizes[index]
            config = Config(program.config.block_size, size, size, program.config.caps)
            per_size[index].append(replace(program, config=config).run_timed(overhead))
    ns: dict[str, list[float]] = {}
    best = [merge_min(runs) for runs in per_size]
    for kind in sorted(counts):
        ns[kind] = [b.get(kind, 0.0) * 1e9 / counts[kind] for b in best]
    total_ops = sum(counts.values())
    ns["all operations"] = [sum(b.values()) * 1e9 / total_ops for b in best]
    return ScalingResult(tuple(sizes), ns)
