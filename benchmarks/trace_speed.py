"""Allocator throughput on a serving trace: the bundled allocator against upstream vLLM 0.8.

Both targets run the same compiled program (``benchmarks.compiled``). Before anything is
timed, one untimed run per target records the (GPU, CPU) free counts after every scheduling
step: the targets must agree at every step (the trace avoids the eviction ties the contract
leaves open) and never show fewer free blocks than the generator's worst-case ledger assumed.
Timing then alternates between the targets, best of ``repeats``: the plain code for the total,
the clocked code for time per operation kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.compiled import (
    CHUNK,
    CompiledProgram,
    ProgramError,
    clock_overhead_ns,
    compile_table_program,
    free_counts,
    free_counts_at,
    merge_min,
)
from benchmarks.serving_trace import Trace, TraceConfig
from models.families.v0.capabilities import Config
from properties.core.targets import Target

__all__ = ["TargetTiming", "Validation", "compare", "validate"]


@dataclass
class TargetTiming:
    """Best-of-repeats CPU seconds of one target on the trace."""

    label: str
    total_s: float = float("inf")
    per_kind_s: dict[str, float] = field(default_factory=dict)

    def as_dict(self, counts: dict[str, int]) -> dict[str, Any]:
        return {"label": self.label, "total_s": self.total_s, "per_kind_s": self.per_kind_s,
                "per_kind_us_per_op": {k: v * 1e6 / counts[k]
                                       for k, v in self.per_kind_s.items() if counts.get(k)}}


@dataclass(frozen=True, slots=True)
class Validation:
    """Free counts at chunk ends (scheduling-step boundaries): equal across targets, never
    below the generator's worst-case ledger; ``points`` is how many were compared."""

    points: int
    equal: bool
    first_mismatch: dict[str, Any] | None
    below_bound: dict[str, Any] | None
    final: dict[str, tuple[int, int]]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.equal and self.below_bound is None and self.error is None

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "points": self.points, "equal": self.equal,
                "first_mismatch": self.first_mismatch, "below_bound": self.below_bound,
                "final_free": {k: list(v) for k, v in self.final.items()},
                "error": self.error}


def config_for(c: TraceConfig, target: Target) -> Config:
    """The pool a trace of shape ``c`` runs on, with ``target``'s capabilities."""
    return Config(c.block_size, c.num_gpu_blocks, c.num_cpu_blocks, target.caps)


def validate(trace: Trace, programs: dict[str, CompiledProgram],
             ) -> tuple[Validation, dict[str, float]]:
    """One plain run per target, with the free counts read (untimed) after every chunk (chunks
    end at scheduling-step boundaries). Also returns each run's time: the first repeat."""
    seen: dict[str, list[tuple[int, int]]] = {}
    seconds: dict[str, float] = {}
    step_of = {end: i for i, end in enumerate(trace.steps)}
    points: list[int] = []
    for label, program in programs.items():
        counts: list[tuple[int, int]] = []

        def record(end: int, env: dict[str, Any], counts: list[tuple[int, int]] = counts,
                   ) -> None:
            counts.append(free_counts(env))

        try:
            seconds[label] = program.run_plain(after_chunk=record)
        except ProgramError as failure:
            error = str(failure)
            try:  # name the operation exactly (a slower run with a marker per operation)
                free_counts_at(program, trace.steps)
            except ProgramError as exact:
                error = str(exact)
            return Validation(0, False, None, None, {}, f"{label}: {error}"), {}
        seen[label] = counts
        points = list(program.ends)
    labels = list(seen)
    mismatch: dict[str, Any] | None = None
    for other in labels[1:]:
        for end, a, b in zip(points, seen[labels[0]], seen[other], strict=True):
            if a != b and mismatch is None:
                mismatch = {"op_index": end, labels[0]: list(a), other: list(b)}
    below: dict[str, Any] | None = None
    for label, counts in seen.items():
        for end, got in zip(points, counts, strict=True):
            bound = trace.worst_free[step_of[end]] if end in step_of else (0, 0)
            if (got[0] < bound[0] or got[1] < bound[1]) and below is None:
                below = {"target": label, "op_index": end, "free": list(got),
                         "ledger_bound": list(bound)}
    final = {label: counts[-1] for label, counts in seen.items()}
    return Validation(len(points), mismatch is None, mismatch, below, final), seconds


def compile_all(trace: Trace, targets: dict[str, Target],
                chunk: int = CHUNK) -> dict[str, CompiledProgram]:
    """The trace rendered and compiled for each target, chunks (about ``chunk`` operations)
    ending at step boundaries: the validation points."""
    return {label: compile_table_program(t, config_for(trace.config, t), trace.program, name=label,
                                         breaks=trace.steps, chunk=chunk)
            for label, t in targets.items()}


def compare(programs: dict[str, CompiledProgram], repeats: int,
            first: dict[str, float] | None = None) -> dict[str, TargetTiming]:
    """Best-of-``repeats`` totals and per-kind times, the targets alternating each round;
    ``first`` holds totals already measured (they count as one plain repeat)."""
    overhead = clock_overhead_ns()
    timings = {label: TargetTiming(label) for label in programs}
    for label, seconds in (first or {}).items():
        if label in timings:
            timings[label].total_s = seconds
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in programs}
    for round_ in range(repeats):
        for label, program in programs.items():
            if not (round_ == 0 and first and label in first):
                timings[label].total_s = min(timings[label].total_s, program.run_plain())
            runs[label].append(program.run_timed(overhead))
    for label, timing in timings.items():
        timing.per_kind_s = merge_min(runs[label])
    return timings


def ratios(theirs: TargetTiming, ours: TargetTiming, kinds: Sequence[str]) -> dict[str, float]:
    """Their time over ours, per kind (above 1: ours is faster)."""
    out = {"total": theirs.total_s / ours.total_s if ours.total_s else float("inf")}
    for kind in kinds:
        mine = ours.per_kind_s.get(kind, 0.0)
        out[kind] = theirs.per_kind_s.get(kind, 0.0) / mine if mine else float("inf")
    return out
