"""How the bundled allocator's per-operation cost grows with the pool (1k to 64k blocks).

Two views, both as ratios to the smallest pool measured in the same process:

- the micro-benchmark steps of ``benchmarks.bench_allocator_scaling`` (each isolates one
  operation at a given pool size, with the pool filled where that matters), re-timed here with
  the CPU clock, every size timed in each round; each step has a memory baseline
  (:mod:`benchmarks.memory_baseline`: the same key sequence over plain structures of the same
  sizes) timed in the same rounds, so the growth the memory hierarchy alone imposes on that
  access pattern is measured next to the step's (see :meth:`ScalingResult.normalised` and
  :meth:`ScalingResult.excess` for the two ways of taking it out);
- the same serving trace replayed on pools of every size (GPU and CPU both ``N`` blocks): one
  program, so only the pool differs (larger pools evict less and hit more).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks.bench_allocator_scaling import MAX_POOL_SHARE, STEPS
from benchmarks.compiled import (
    CLOCK,
    CompiledProgram,
    clean_heap,
    clock_overhead_ns,
    merge_min,
    no_gc,
)
from benchmarks.memory_baseline import BASELINES
from models.families.v0.capabilities import Config

__all__ = ["MAX_POOL_SHARE", "ScalingResult", "measure_steps", "trace_scaling"]


@dataclass(frozen=True, slots=True)
class ScalingResult:
    """Nanoseconds per operation, ``ns[name][i]`` at ``sizes[i]`` (best of the repeats).

    ``baseline`` holds the paired memory baseline's best times (micro steps only) and
    ``samples`` every repeat of the step, for the spread."""

    sizes: tuple[int, ...]
    ns: dict[str, list[float]]
    baseline: dict[str, list[float]] = field(default_factory=dict)
    samples: dict[str, list[list[float]]] = field(default_factory=dict)

    def ratios(self) -> dict[str, list[float]]:
        """Raw: each size's time over the first size's."""
        return _ratios(self.ns)

    def baseline_ratios(self) -> dict[str, list[float]]:
        return _ratios(self.baseline)

    def normalised(self) -> dict[str, list[float]]:
        """Raw ratio over the memory baseline's ratio: the growth beyond the memory hierarchy."""
        base = self.baseline_ratios()
        return {name: [r / b if b else float("inf") for r, b in zip(raw, base[name],
                                                                      strict=True)]
                for name, raw in self.ratios().items() if name in base}

    def excess(self) -> dict[str, list[float]]:
        """Growth of the time the step spends beyond its baseline's lookups:
        ``(step(N) - base(N)) / (step(first) - base(first))``. Dividing ratios (see
        :meth:`normalised`) over-corrects when the lookups are a small part of the step (a
        6x baseline on 10% of the time explains 1.5x, not 6x); subtracting assumes the step
        does at least the baseline's lookups, which each pattern is built to be."""
        out: dict[str, list[float]] = {}
        for name, raw in self.ns.items():
            if name not in self.baseline:
                continue
            rest = [t - b for t, b in zip(raw, self.baseline[name], strict=True)]
            out[name] = [r / rest[0] if rest[0] > 0 else float("inf") for r in rest]
        return out

    def spread(self) -> dict[str, list[float]]:
        """Per size, the median repeat over the best one (1.0: every repeat agreed)."""
        return {name: [statistics.median(runs) / min(runs) if min(runs) else float("inf")
                       for runs in per_size]
                for name, per_size in self.samples.items()}

    def paired(self) -> dict[str, list[list[float]]]:
        """Per size, the raw ratio within each round (``samples[i][r] / samples[0][r]``):
        runs of one round are seconds apart, so a slow spell of the machine that spans a
        round cancels out; the ratios' median and range show how firm the best-of ratio is."""
        return {name: [[t / first if first else float("inf")
                        for t, first in zip(runs, per_size[0], strict=True)]
                       for runs in per_size]
                for name, per_size in self.samples.items()}

    def worst(self, view: str = "raw") -> tuple[str, float]:
        """The operation whose cost grows most from the first to the last size: ``view`` is
        "raw", "normalised" or "excess" (see those methods)."""
        ratios = {"raw": self.ratios, "normalised": self.normalised,
                  "excess": self.excess}[view]()
        name, values = max(ratios.items(), key=lambda kv: kv[1][-1])
        return name, values[-1]

    def as_dict(self) -> dict[str, Any]:
        worst, ratio = self.worst()
        out: dict[str, Any] = {"sizes": list(self.sizes), "ns_per_op": self.ns,
                               "ratios": self.ratios(),
                               "worst": {"operation": worst, "ratio": ratio}}
        if self.baseline:
            name, value = self.worst("normalised")
            excess_name, excess = self.worst("excess")
            out.update(baseline_ns_per_op=self.baseline, baseline_ratios=self.baseline_ratios(),
                       normalised_ratios=self.normalised(), excess_ratios=self.excess(),
                       worst_normalised={"operation": name, "ratio": value},
                       worst_excess={"operation": excess_name, "ratio": excess})
        if self.samples:
            out.update(samples_ns_per_op=self.samples, spread_median_over_best=self.spread(),
                       paired_ratios=self.paired())
        return out


def _ratios(ns: dict[str, list[float]]) -> dict[str, list[float]]:
    return {name: [t / times[0] if times[0] else float("inf") for t in times]
            for name, times in ns.items()}


def _time_run(run: Callable[[], None], count: int, overhead_ns: float) -> float:
    with no_gc():
        start = CLOCK()
        run()
        elapsed = CLOCK() - start
    return max(0.0, elapsed - overhead_ns) / count


def measure_steps(sizes: Sequence[int], ops: int, repeats: int,
                  names: Sequence[str] | None = None) -> ScalingResult:
    """Best-of-``repeats`` CPU nanoseconds per operation for each micro-benchmark step and
    its memory baseline (the calibrated cost of the clock readings subtracted), after one
    warm-up run of both on the smallest pool.

    Each round first sets up every size (in an order that rotates every round), collects
    the heap (the previous round's pools die as cyclic garbage), then times the runs back to
    back, then the same for the baselines: a round's timed runs are a few milliseconds apart,
    so the machine's slow and fast spells (other processes on the shared cores) hit every
    size of a round alike, and the rotation spreads the warmer cache of the last-built pool
    over all sizes. ``ops`` is capped at ``min(sizes) // MAX_POOL_SHARE``."""
    ops = max(1, min(ops, min(sizes) // MAX_POOL_SHARE))
    overhead = clock_overhead_ns()
    out: dict[str, list[float]] = {}
    base_out: dict[str, list[float]] = {}
    samples: dict[str, list[list[float]]] = {}
    for name, step in STEPS.items():
        if names is not None and name not in names:
            continue
        baseline = BASELINES[name]
        _time_run(*step(sizes[0], ops), overhead)  # warm-up: first calls, lazy imports
        _time_run(*baseline(sizes[0], ops), overhead)
        runs: list[list[float]] = [[] for _ in sizes]
        base = [float("inf")] * len(sizes)
        for round_ in range(repeats):
            shift = round_ % len(sizes)
            order = [*range(shift, len(sizes)), *range(shift)]
            built = [(index, *step(sizes[index], ops)) for index in order]
            clean_heap()
            for index, run, count in built:
                runs[index].append(_time_run(run, count, overhead))
            del built
            clean_heap()
            built = [(index, *baseline(sizes[index], ops)) for index in order]
            for index, run, count in built:
                base[index] = min(base[index], _time_run(run, count, overhead))
            del built
        out[name] = [min(r) for r in runs]
        base_out[name] = base
        samples[name] = runs
    return ScalingResult(tuple(sizes), out, base_out, samples)


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
