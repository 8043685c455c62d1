"""``python -m benchmarks [--quick]``: allocator throughput and suite speed, in one run.

1. Throughput: one serving trace (``benchmarks.serving_trace``) compiled for the bundled
   allocator, vLLM 0.8's v0 allocator (the ``vllm-block`` wheel) and Aphrodite 0.6.5's (when
   its source is available; the column is skipped with the reason otherwise), validated
   untimed, then timed per operation kind; reported per unit of work (prompt block, token,
   event) and as upstream time / ours. ``--sections ops`` reports the same table at two
   scales, with a ``vllm-v1`` column when vLLM 0.33.0's wheel is cached: its v1
   ``BlockPool`` driven through the same trace (``benchmarks.v1_on_v0_trace``: ``n/a`` for
   the kinds v1 has no counterpart of, its total over the kinds both ran), shown for
   contrast; the section judges the two-scale target (>= 4x vLLM 0.8 and Aphrodite on the whole
   trace) where ``throughput`` judges the single-trace one (>= 10x vLLM 0.8).
2. Scaling: the bundled allocator's per-operation cost on pools of 1k to 64k blocks, as ratios
   to 1k (the micro-benchmark steps of ``bench_allocator_scaling``, and one trace replayed on
   every pool size).
3. Suite speed: state-machine steps per second with the model and shadow memory on, checking
   time over bare allocator time for the same calls, and the time to catch each mutant of the
   self-test zoo (skipped, with a message, when ``tests.zoo`` is absent).

Targets that are missed get a cProfile summary. All times are thread CPU time unless marked
wall. Prints tables and writes ``benchmarks/results.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import models
import prefixcache
import properties
from benchmarks import (
    floor,
    pool_scaling,
    profiling,
    suite_speed,
    trace_speed,
    v1_on_v0_trace,
    zoo_catch,
)
from benchmarks.bench_allocator_scaling import STEPS
from benchmarks.compiled import CLOCK, CompiledProgram, compile_table_program
from benchmarks.serving_trace import TraceConfig, generate
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from properties.core.targets import DEFAULT_SPEC, Target, load_target
from properties.families.v0 import upstream as v0_upstream
from properties.families.v0.adapter import Unsupported
from properties.families.v1 import targets as v1_targets
from properties.families.v1 import upstream as v1_upstream

__all__ = ["Mode", "main"]

VLLM_SPEC = "properties.upstream:vllm_v0_allocator"
APHRODITE_SPEC = "properties.upstream:aphrodite_allocator"
RESULTS = Path(__file__).resolve().parent / "results.json"

#: The speed targets of the throughput, scaling and suite sections.
WANT_SPEEDUP = 10.0  # ours at least this many times faster than vLLM 0.8 on the default trace
WANT_SCALING = 1.3  # per-operation cost at 64k blocks within this factor of 1k
WANT_CHECK_RATIO = 5.0  # model + shadow checking at most this many times the bare allocator
#: The ``ops`` section's target: the whole trace at least this many times faster
#: than each v0 upstream column (vLLM 0.8 and Aphrodite).
WANT_OPS_SPEEDUP = 4.0
V1_LABEL = "vllm-v1"  # the ops section's vLLM v1 BlockPool column (vLLM 0.33.0's wheel)
V1_COLUMN_VERSION = "0.33.0"

#: Where each party's code lives, for profiles.
OURS_CODE = (profiling.package_dir(prefixcache),)
VLLM_CODE = ("vllm_block" + os.sep,)
SUITE_CODE = (profiling.package_dir(models), profiling.package_dir(properties))

#: A small trace the oracle can judge step by step (tiny blocks and vocabulary: many hits).
SMALL_TRACE = TraceConfig(
    seed=3, num_requests=30, block_size=4, num_gpu_blocks=48, num_cpu_blocks=32, max_running=8,
    arrivals_per_step=2, system_prompt_tokens=(8, 24), suffix_tokens=(1, 12),
    output_tokens=(1, 16), max_samples=3, lookahead=3, vocab=50)


@dataclass(frozen=True, slots=True)
class Mode:
    """Budgets of one run."""

    name: str
    trace: TraceConfig
    repeats: int
    scaling_sizes: tuple[int, ...]
    scaling_ops: int
    scaling_repeats: int
    scaling_steps: tuple[str, ...] | None  # None: every micro-benchmark step
    scaling_trace: TraceConfig
    machine_examples: int
    machine_steps: int
    check_trace: TraceConfig
    zoo_examples: int | None  # None: the zoo's own schedules (tests.zoo.harness.BUDGETS)
    zoo_only: tuple[str, ...] | None
    zoo_budget_s: float
    ops_small: TraceConfig  # the ``ops`` section's scales: no LoRA extra keys (Aphrodite's
    ops_large: TraceConfig  # allocator has none) of the ``ops`` section


DEFAULT = Mode(
    name="default",
    trace=TraceConfig(num_requests=400),
    repeats=3,
    scaling_sizes=(1024, 4096, 16384, 65536),
    scaling_ops=1024,  # capped at a quarter of the smallest pool (pool_scaling)
    scaling_repeats=5,
    scaling_steps=None,
    scaling_trace=TraceConfig(seed=1, num_requests=120, num_gpu_blocks=1024,
                              num_cpu_blocks=1024, max_running=32),
    machine_examples=50,
    machine_steps=50,
    check_trace=SMALL_TRACE,
    zoo_examples=None,
    zoo_only=None,
    zoo_budget_s=900.0,
    ops_small=TraceConfig(num_requests=400, lora=0.0),
    ops_large=TraceConfig(num_requests=800, num_gpu_blocks=4096, num_cpu_blocks=8192,
                          max_running=128, lora=0.0),
)

QUICK_TRACE = TraceConfig(num_requests=40, num_gpu_blocks=128, num_cpu_blocks=1024,
                          max_running=24, arrivals_per_step=8, system_prompt_tokens=(32, 128),
                          suffix_tokens=(4, 64), output_tokens=(4, 48))

QUICK = Mode(
    name="quick",
    trace=QUICK_TRACE,
    repeats=1,
    scaling_sizes=(1024, 4096),
    scaling_ops=128,
    scaling_repeats=1,
    scaling_steps=("allocate mutable", "free (cached -> evictor)", "evict (times out of order)"),
    scaling_trace=TraceConfig(seed=1, num_requests=20, num_gpu_blocks=1024, num_cpu_blocks=1024,
                              max_running=8, system_prompt_tokens=(32, 128),
                              suffix_tokens=(4, 64), output_tokens=(4, 32)),
    machine_examples=4,
    machine_steps=20,
    check_trace=replace(SMALL_TRACE, num_requests=8),
    zoo_examples=5,
    zoo_only=("recursive_fork", "free_count_omits_evictor"),
    zoo_budget_s=10.0,
    ops_small=replace(QUICK_TRACE, lora=0.0),
    ops_large=TraceConfig(num_requests=80, num_gpu_blocks=256, num_cpu_blocks=2048,
                          max_running=48, arrivals_per_step=8, system_prompt_tokens=(32, 128),
                          suffix_tokens=(4, 64), output_tokens=(4, 48)),
)


# --------------------------------------------------------------------------- printing


def _print(line: str = "") -> None:
    print(line, flush=True)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> None:
    """Left-align the first column, right-align the others (``align`` overrides: l/r)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    aligns = align or "l" + "r" * (len(header) - 1)

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) if a == "l" else str(c).rjust(w)
                         for c, w, a in zip(row, widths, aligns, strict=True))

    _print(fmt(header))
    _print("-" * len(fmt(header)))
    for row in rows:
        _print(fmt(row))


def _verdict(ok: bool, what: str, value: str) -> str:
    return f"target: {what} -> {'MET' if ok else 'MISSED'} ({value})"


def _print_profile(title: str, stats: Any, under: Sequence[str] | None, n: int = 8,
                   ) -> dict[str, Any]:
    areas = profiling.by_area(stats)
    top = profiling.top_functions(stats, n, under)
    _print(f"  profile: {title}")
    _print("    time by area: " + ", ".join(f"{k} {v:.0%}" for k, v in areas.items()
                                            if v >= 0.01))
    for row in top:
        _print(f"    {row['own_share']:6.1%} own {row['own_s']:7.3f} s  "
               f"{row['calls']:>8} calls  {row['function']}")
    return {"title": title, "areas": areas, "top": top}


def _us(seconds: float, count: int) -> str:
    return f"{seconds * 1e6 / count:.2f}" if count else "-"


# --------------------------------------------------------------------------- targets


def _load_upstream(spec: str, what: str, fetcher: Callable[[], object], fetch: bool,
                   ) -> tuple[Target | None, str]:
    """The target ``spec`` names, fetching its release once (``fetcher``) when it does not
    load and fetching is allowed; or None and why not."""
    try:
        return load_target(spec), ""
    except Exception as first:
        if not fetch:
            return None, f"{what} unavailable ({type(first).__name__}: {first}); --no-fetch"
    try:
        fetcher()
        return load_target(spec), ""
    except Exception as exc:
        return None, (f"{what} unavailable ({type(exc).__name__}: {exc}); run "
                      "`python -m properties.upstream fetch`")


def load_targets(fetch: bool) -> tuple[Target, dict[str, Target], dict[str, str]]:
    """The bundled allocator, and the upstream v0 allocators that load (label -> target),
    with the reason for each one that does not (label -> reason). A release that is not
    cached (vLLM 0.8's vllm-block wheel, Aphrodite 0.6.5's) is fetched once if allowed;
    Aphrodite's source may also come from ``$PREFIXCACHE_APHRODITE_SOURCE`` or an installed
    ``aphrodite``."""
    ours = load_target(DEFAULT_SPEC)
    upstream: dict[str, Target] = {}
    missing: dict[str, str] = {}
    for label, spec, what, fetcher in (
        ("vllm", VLLM_SPEC, "vLLM 0.8 allocator", v0_upstream.fetch_vllm_block),
        ("aphrodite", APHRODITE_SPEC, "Aphrodite allocator", v0_upstream.fetch_aphrodite),
    ):
        target, why = _load_upstream(spec, what, fetcher, fetch)
        if target is None:
            missing[label] = why
        else:
            upstream[label] = target
    return ours, upstream, missing


def load_v1_target(fetch: bool) -> tuple[Any, str | None]:
    """vLLM 0.33.0's v1 ``BlockPool`` (a ``PoolTarget``) for the ops section's v1 column, or
    None and why not. Loaded from the cached wheel (or ``$PREFIXCACHE_VLLM_V1_SOURCE``);
    fetched only if allowed."""
    version = V1_COLUMN_VERSION
    command = f"`{v1_upstream.FETCH_COMMAND} --version {version}`"
    cached = (v1_upstream.cached_wheel(version) is not None
              or v1_upstream.source_from_env(version) is not None)
    if not cached and not fetch:
        return None, (f"the vLLM {version} wheel is not cached (--no-fetch); fetch it with "
                      f"{command}")
    try:
        return v1_targets.vllm_v033_block_pool(), None
    except Exception as exc:
        return None, (f"vLLM {version}'s v1 BlockPool unavailable ({type(exc).__name__}: "
                      f"{exc}); fetch the wheel with {command}")


def _label(target: Target) -> str:
    return f"{target.name} {target.version}"


# --------------------------------------------------------------------------- section 1


def _units(trace: Any) -> dict[str, tuple[str, int]]:
    """Units of work per operation kind: prompt blocks for allocations, tokens for appends,
    events (operations) otherwise."""
    bs = trace.config.block_size
    totals: dict[str, int] = {}
    names = {"table_allocate": "prompt block", "table_append": "token"}
    for op in trace.program:
        if isinstance(op, ops.TableAllocate):
            n = -(-len(op.tokens) // bs)
        elif isinstance(op, ops.TableAppend):
            n = len(op.tokens)
        else:
            n = 1
        totals[op.kind] = totals.get(op.kind, 0) + n
    return {kind: (names.get(kind, "event"), n) for kind, n in totals.items()}


def section_throughput(mode: Mode, ours: Target, upstream: dict[str, Target],
                       missing: dict[str, str], trace_config: TraceConfig | None = None,
                       profile: bool = True, v1: Any = None, ops_target: bool = False,
                       ) -> dict[str, Any]:
    """``v1``: a v1 ``PoolTarget`` to add as the ``vllm-v1`` column (the ops section);
    ``ops_target``: judge the ``ops`` section's target instead of the throughput section's."""
    trace_config = mode.trace if trace_config is None else trace_config
    _print(f"== 1. Throughput on a serving trace (thread CPU time, best of {mode.repeats})")
    trace = generate(trace_config)
    counts = dict(trace.op_counts())
    units = _units(trace)
    c, s = trace.config, trace.stats
    _print(f"trace: {len(trace.program):,} operations in {s['steps']:,} scheduling steps; "
           f"{c.num_requests} requests ({s.get('follow_ups', 0)} follow-ups), "
           f"{s['tables']} tables; GPU {c.num_gpu_blocks} / CPU {c.num_cpu_blocks} blocks of "
           f"{c.block_size}")
    _print(f"       {s.get('forks', 0)} forks, {s.get('cows', 0)} copy-on-writes, "
           f"{s.get('swap_outs', 0)} swap-outs, {s.get('swap_ins', 0)} swap-ins, "
           f"{s.get('recomputes', 0)} recompute preemptions, {s['running_at_end']} sequences "
           "running at the end")
    targets = {"ours": ours, **upstream}
    for label, why in missing.items():
        _print(f"SKIPPED the {label} column: {why}")
    programs: dict[str, CompiledProgram] = {}
    for label, target in targets.items():
        try:
            programs.update(trace_speed.compile_all(trace, {label: target}))
        except Unsupported as exc:
            if label == "ours":
                raise
            missing = {**missing, label: f"the trace uses what it lacks ({exc})"}
            _print(f"SKIPPED the {label} column: {missing[label]}")
    check, first = trace_speed.validate(trace, programs)
    if check.error:
        _print(f"validation FAILED: {check.error}")
        if check.error.startswith("ours"):
            raise RuntimeError(f"the trace failed on the bundled allocator: {check.error}")
        programs = {"ours": programs["ours"]}
        first = {}
    else:
        final = ", ".join(f"{k} {tuple(v)}" for k, v in check.final.items())
        same = "equal at all" if check.equal else f"DIFFER ({check.first_mismatch}) at some of"
        bound = "never below" if check.below_bound is None else \
            f"BELOW ({check.below_bound})"
        _print(f"validation: (GPU, CPU) free counts {same} {check.points} step boundaries "
               f"checked; {bound} the generator's worst-case bound; final {final}")
    timings = trace_speed.compare(programs, mode.repeats, first)
    v1_timing: v1_on_v0_trace.V1Timing | None = None
    v1_info: dict[str, Any] = {}
    if v1 is not None:
        v1_timing, v1_info = _v1_column(trace, v1, mode.repeats)
        if v1_timing is None:
            missing = {**missing, V1_LABEL: v1_info["skipped"]}
    mine = timings["ours"]
    others = {label: t for label, t in timings.items() if label != "ours"}
    upstream = {label: t for label, t in upstream.items() if label in others}
    kinds = sorted(counts, key=lambda k: -mine.per_kind_s.get(k, 0.0))
    ratio = {label: trace_speed.ratios(t, mine, kinds) for label, t in others.items()}
    header = ["operation", "unit", "units", "ours us/unit"]
    for label in others:
        header += [f"{label} us/unit", f"{label}/ours"]
    if v1_timing is not None:
        header += [f"{V1_LABEL} us/unit", f"{V1_LABEL}/ours"]
    rows = []
    for kind in kinds:
        unit, n = units[kind]
        row = [kind, unit, f"{n:,}", _us(mine.per_kind_s.get(kind, 0.0), n)]
        for label, t in others.items():
            row += [_us(t.per_kind_s.get(kind, 0.0), n), f"{ratio[label][kind]:.2f}"]
        if v1_timing is not None:
            row += _v1_cells(v1_timing, mine, kind, n)
        rows.append(row)
    total = ["total (plain run, s)", "operation", f"{len(trace.program):,}",
             f"{mine.total_s:.3f}"]
    for label, t in others.items():
        total += [f"{t.total_s:.3f}", f"{ratio[label]['total']:.2f}"]
    if v1_timing is not None:
        v1_total, ours_same = v1_timing.comparable_s(), _comparable_s(mine)
        total += [f"{v1_total:.3f}*", f"{v1_total / ours_same:.2f}*" if ours_same else "-"]
        v1_info["total_comparable_s"] = {"vllm-v1": v1_total, "ours": ours_same,
                                         "ratio": v1_total / ours_same if ours_same else None}
    rows.append(total)
    _table(header, rows)
    _print("  (ratios: upstream time / ours, above 1 = ours faster)")
    if v1_timing is not None:
        _print_v1_notes(v1_timing, mine, counts, v1_info)
    floors = floor.measure(programs["ours"], mode.repeats)
    for name, seconds in floors.items():
        line = (f"floor ({name}; benchmarks/floor.py): {seconds:.3f} s; ours "
                f"{mine.total_s / seconds:.1f}x the floor")
        for label, t in others.items():
            line += f"; {label} {t.total_s / seconds:.1f}x"
        _print(line)
    result: dict[str, Any] = {
        "trace": {"config": asdict(trace.config), "operations": len(trace.program),
                  "op_counts": counts, "units": {k: list(v) for k, v in units.items()},
                  "stats": trace.stats},
        "validation": check.as_dict(),
        "targets": {"ours": _label(ours),
                    **{label: _label(t) if t else None for label, t in upstream.items()},
                    **{label: None for label in missing}},
        "timings": {label: t.as_dict(counts) for label, t in timings.items()},
        "ratio_vllm_over_ours": ratio.get("vllm", {}),
        "ratios_over_ours": ratio,
        "floors_s": floors,
        "skipped": missing.get("vllm"),
        "skipped_columns": missing,
    }
    if v1 is not None:
        result[V1_LABEL] = v1_info
    if "vllm" in others:
        if ops_target:
            values = {label: ratio[label]["total"] for label in ("vllm", "aphrodite")
                      if label in ratio}
            met = all(v >= WANT_OPS_SPEEDUP for v in values.values()) and len(values) == 2
            shown = ", ".join(f"{label} {values[label]:.2f}x" if label in values
                              else f"{label} unavailable" for label in ("vllm", "aphrodite"))
            _print(_verdict(met, f"whole trace >= {WANT_OPS_SPEEDUP:g}x faster than vLLM 0.8 "
                            "and Aphrodite", shown))
            result["target"] = {"want": f">= {WANT_OPS_SPEEDUP} (vllm and aphrodite)",
                                "values": values, "met": met}
        else:
            value = ratio["vllm"]["total"]
            met = value >= WANT_SPEEDUP
            _print(_verdict(met, f"ours >= {WANT_SPEEDUP:g}x faster than vLLM 0.8",
                            f"{value:.2f}x"))
            result["target"] = {"want": f">= {WANT_SPEEDUP}", "value": value, "met": met}
        slower = [k for k in kinds if any(r[k] < 1.0 for r in ratio.values())]
        over = (" (the v0 columns: " + ", ".join(ratio) +
                f"; {V1_LABEL} is shown for contrast, not a target)") if v1 is not None else ""
        _print(_verdict(not slower, "every operation kind faster than every upstream column"
                        + over, "slower: " + (", ".join(slower) or "none")))
        result["slower_kinds"] = slower
        if not met and profile:
            result["profiles"] = [
                _print_profile("bundled allocator on the trace (own time, prefixcache/)",
                               profiling.profile(_exec_plain(programs["ours"])), OURS_CODE),
                _print_profile("vLLM 0.8 on the same trace, for contrast",
                               profiling.profile(_exec_plain(programs["vllm"])), VLLM_CODE, 5),
            ]
    return result


def section_ops(mode: Mode, ours: Target, upstream: dict[str, Target],
                missing: dict[str, str], v1: Any = None) -> dict[str, Any]:
    """The per-operation table at two scales (the throughput trace's shape, and twice
    the requests on twice the pool; neither with LoRA keys, which Aphrodite lacks), every
    available upstream column and, given ``v1`` (vLLM 0.33.0's ``BlockPool``), the
    ``vllm-v1`` column (``benchmarks.v1_on_v0_trace``; skipped with the reason in
    ``missing`` otherwise); no profiles; judged by ``WANT_OPS_SPEEDUP``."""
    out: dict[str, Any] = {}
    for name, config in (("small", mode.ops_small), ("large", mode.ops_large)):
        _print(f"-- scale {name!r}")
        out[name] = section_throughput(mode, ours, upstream, missing, config, profile=False,
                                       v1=v1, ops_target=True)
    return out


def _comparable_s(timing: trace_speed.TargetTiming) -> float:
    return sum(timing.per_kind_s.get(k, 0.0) for k in v1_on_v0_trace.COMPARABLE)


def _v1_cells(v1: v1_on_v0_trace.V1Timing, mine: trace_speed.TargetTiming, kind: str,
              n: int) -> list[str]:
    if kind not in v1_on_v0_trace.COMPARABLE:
        return ["n/a", "n/a"]
    theirs, ours = v1.per_kind_s.get(kind, 0.0), mine.per_kind_s.get(kind, 0.0)
    return [_us(theirs, n), f"{theirs / ours:.2f}" if ours else "-"]


def _v1_column(trace: Any, v1: Any, repeats: int,
               ) -> tuple[v1_on_v0_trace.V1Timing | None, dict[str, Any]]:
    """Size, validate (printing the line) and time the v1 pool on ``trace``: the timing and
    the results entry, or None and an entry with ``skipped``."""
    label = f"{v1.name} {v1.version}"
    try:
        make = v1_on_v0_trace.env_factory(v1, trace.config.block_size)
        program, env, refused = v1_on_v0_trace.size_pool(trace, make)
    except Exception as exc:  # an unmapped kind, a refusal at every size, a pool's assert
        why = f"the v1 replay of the trace failed ({type(exc).__name__}: {exc})"
        _print(f"SKIPPED the {V1_LABEL} column: {why}")
        return None, {"skipped": why}
    check = v1_on_v0_trace.check(env, program.num_blocks)
    size = (f"pool of {program.num_blocks} blocks" +
            (" (the trace's GPU pool size)" if not refused else
             f" (the trace's {trace.config.num_gpu_blocks} refused a block; tried "
             f"{', '.join(map(str, refused))})"))
    info: dict[str, Any] = {"target": label, "num_blocks": program.num_blocks,
                            "refused_sizes": refused, "validation": check.as_dict()}
    if not check.ok:
        _print(f"validation ({V1_LABEL}, {label}) FAILED on a {size}: {check.error}")
        info["skipped"] = f"validation failed: {check.error}"
        _print(f"SKIPPED the {V1_LABEL} column: {info['skipped']}")
        return None, info
    _print(f"validation ({V1_LABEL}, {label}, {size}): the replay raised nothing; final free "
           f"count {check.free} = {check.num_blocks} - 1 null block - {check.held} blocks held "
           f"by {check.live_tables} live tables, and every held block's ref_cnt equals its "
           "holders")
    timing = v1_on_v0_trace.compare(program, repeats, V1_LABEL)
    info["timing"] = timing.as_dict(dict(trace.op_counts()))
    return timing, info


def _print_v1_notes(v1: v1_on_v0_trace.V1Timing, mine: trace_speed.TargetTiming,
                    counts: dict[str, int], info: dict[str, Any]) -> None:
    kinds = ", ".join(v1_on_v0_trace.COMPARABLE)
    total = info["total_comparable_s"]
    _print(f"  * {V1_LABEL} ({info['target']}, benchmarks/v1_on_v0_trace.py): its total and "
           f"ratio are over the operation kinds both ran ({kinds}): the sum of their per-kind "
           f"times, {total['vllm-v1']:.3f} s, over ours' for the same kinds, "
           f"{total['ours']:.3f} s; ratio = vllm-v1 time / ours (above 1 = ours faster)")
    shares = "; ".join(f"{kind} {v1.hash_s[kind] / v1.per_kind_s[kind]:.0%}"
                       for kind in ("table_allocate", "table_append")
                       if v1.per_kind_s.get(kind) and kind in v1.hash_s)
    swap = v1.per_kind_s.get("table_swap")
    swaps = counts.get("table_swap", 0)
    _print(f"    its times include the shim (one call per operation, list appends, slot "
           f"arithmetic) and v1's request block hashing (pickle SHA-256; share of the kind's "
           f"time: {shares}); n/a = no v1 counterpart (swaps, copy-on-write clearing, "
           f"mark_accessed, mark_computed)" +
           (f"; the swaps ran as v1 preemption / re-admission "
            f"({_us(swap, swaps)} us/event), not compared" if swap is not None and swaps
            else ""))


def _exec_plain(program: CompiledProgram) -> Callable[[], None]:
    env = program.fresh_env()

    def run() -> None:
        for code in program.plain:
            exec(code, env)

    return run


# --------------------------------------------------------------------------- section 2


def section_scaling(mode: Mode, ours: Target) -> dict[str, Any]:
    sizes = mode.scaling_sizes
    _print(f"== 2. Per-operation cost vs pool size, bundled allocator (ratio to {sizes[0]} "
           f"blocks; CPU time, best of {mode.scaling_repeats})")
    micro = pool_scaling.measure_steps(sizes, mode.scaling_ops, mode.scaling_repeats,
                                       mode.scaling_steps)
    header = ["operation", f"ns/op @{sizes[0]}", *(f"x @{n}" for n in sizes[1:])]
    _print_micro(micro)
    trace = generate(mode.scaling_trace)
    c = trace.config
    program = compile_table_program(ours, Config(c.block_size, c.num_gpu_blocks,
                                                 c.num_cpu_blocks, ours.caps),
                                    trace.program, name="scaling")
    _print()
    _print(f"one trace ({len(trace.program):,} operations, generated for {c.num_gpu_blocks} "
           "GPU blocks) replayed on pools of N GPU + N CPU blocks:")
    replayed = pool_scaling.trace_scaling(program, sizes, mode.scaling_repeats)
    traced = replayed.ratios()
    _table(header, [[name, f"{times[0]:.0f}", *(f"{r:.2f}" for r in traced[name][1:])]
                    for name, times in replayed.ns.items()])
    worst_name, worst = micro.worst()
    norm_name, norm = micro.worst("normalised")
    excess_name, excess = micro.worst("excess")
    overall = traced["all operations"][-1]
    met = worst <= WANT_SCALING and overall <= WANT_SCALING
    met_excess = excess <= WANT_SCALING and overall <= WANT_SCALING
    _print(_verdict(met, f"per-op cost {sizes[0]} -> {sizes[-1]} within {WANT_SCALING}x, raw",
                    f"worst micro step {worst_name!r} {worst:.2f}x; trace overall "
                    f"{overall:.2f}x"))
    _print(_verdict(met_excess, "the same, beyond the memory baseline (excess)",
                    f"worst micro step {excess_name!r} {excess:.2f}x; trace overall "
                    f"{overall:.2f}x raw; by raw / base instead: {norm_name!r} {norm:.2f}x"))
    result: dict[str, Any] = {
        "micro": micro.as_dict(), "trace": replayed.as_dict(),
        "target": {"want": f"<= {WANT_SCALING}", "worst_micro": worst,
                   "worst_micro_step": worst_name, "trace_overall": overall, "met": met,
                   "worst_micro_beyond_memory_baseline": excess,
                   "worst_micro_step_beyond_memory_baseline": excess_name,
                   "worst_micro_raw_over_baseline": norm,
                   "worst_micro_step_raw_over_baseline": norm_name,
                   "met_beyond_memory_baseline": met_excess},
    }
    if not met and len(sizes) > 1:
        result["profiles"] = [_scaling_profiles(worst_name, sizes)]
    return result


def _print_micro(micro: pool_scaling.ScalingResult) -> None:
    """Per step and size: raw ratio / memory-baseline ratio / raw over baseline / excess,
    and the spread of the repeats (noisiest size's median over best)."""
    sizes = micro.sizes
    views = (micro.ratios(), micro.baseline_ratios(), micro.normalised(), micro.excess())
    spread, paired = micro.spread(), micro.paired()
    header = ["operation", f"ns/op @{sizes[0]}", "base ns",
              *(f"raw/base/norm/excess @{n}" for n in sizes[1:]), "spread",
              f"paired @{sizes[-1]}"]
    rows = []
    for name, times in micro.ns.items():
        last = paired[name][-1]
        rows.append([name, f"{times[0]:.0f}", f"{micro.baseline[name][0]:.0f}",
                     *("/".join(f"{view[name][i]:.2f}" for view in views)
                       for i in range(1, len(sizes))),
                     f"{max(spread[name]):.2f}",
                     f"{statistics.median(last):.2f} [{min(last):.2f}-{max(last):.2f}]"])
    _table(header, rows)
    _print("  raw = the step's time over its time at the smallest pool; base = the same for its "
           "memory baseline (the step's key sequence over plain dicts, list or heap of the "
           "pool's size, timed in the same rounds); norm = raw / base; excess = the same ratio for "
           "the step's time minus its baseline's (the growth beyond the memory baseline); "
           "spread = median repeat over the best, at the noisiest size (ratios use the best); "
           "paired = median [range] of the raw ratio within each round")


def _scaling_profiles(name: str, sizes: Sequence[int]) -> dict[str, Any]:
    """Own time per operation of each function of the step at the smallest and the largest
    size (each profiled over as many operations as the timed runs do): where the growth
    is."""
    step = STEPS[name]
    ops = max(1, min(sizes) // pool_scaling.MAX_POOL_SHARE)
    per_op: list[dict[str, float]] = []
    for size in (sizes[0], sizes[-1]):
        best: dict[str, float] = {}
        for _ in range(2):  # per function, the better of two profiled runs
            run, count = step(size, ops)
            stats = profiling.profile(run, cpu_timer=True)
            for row in profiling.top_functions(stats, 12, OURS_CODE):
                ns = row["own_s"] * 1e9 / count
                best[row["function"]] = min(best.get(row["function"], ns), ns)
        per_op.append(best)
    small, large = per_op
    growth = sorted(large, key=lambda f: large[f] - small.get(f, 0.0), reverse=True)[:6]
    _print(f"  profile: {name!r}, own ns per operation at {sizes[0]} -> {sizes[-1]} blocks "
           "(largest growth first)")
    rows = []
    for function in growth:
        before, after = small.get(function, 0.0), large[function]
        _print(f"    {before:9.0f} -> {after:9.0f} ns  {function}")
        rows.append({"function": function, "ns_small": before, "ns_large": after})
    return {"title": f"{name} per-function growth", "sizes": [sizes[0], sizes[-1]],
            "top": rows}


# --------------------------------------------------------------------------- section 3


def section_suite(mode: Mode, ours: Target) -> dict[str, Any]:
    _print(f"== 3. Suite speed against the bundled allocator ({mode.machine_examples} "
           f"examples x up to {mode.machine_steps} steps per machine, derandomized)")
    runs = [suite_speed.run_machine(name, ours, mode.machine_examples, mode.machine_steps)
            for name in suite_speed.MACHINES]
    rows = []
    for r in runs:
        hyp = max(0.0, r.cpu - r.execute - r.oracle_in_run)
        rows.append([f"{r.machine} machine", f"{r.steps:,}",
                     f"{r.steps_per_second:.0f} ({r.steps_per_wall_second:.0f})",
                     f"{hyp / r.cpu:.0%}" if r.cpu else "-",
                     f"{(r.execute - r.snapshot) * 1e6 / max(r.steps, 1):.0f}",
                     f"{r.snapshot * 1e6 / max(r.steps, 1):.0f}",
                     f"{r.oracle * 1e6 / max(r.steps, 1):.0f}",
                     f"{r.bare * 1e6 / max(r.steps, 1):.1f}", f"{r.check_ratio:.1f}"])
    small = generate(mode.check_trace)
    sc = small.config
    cost = suite_speed.trace_check_cost(
        ours, Config(sc.block_size, sc.num_gpu_blocks, sc.num_cpu_blocks, ours.caps),
        small.program)
    rows.append(["small serving trace", f"{cost.ops:,}", "-", "-",
                 f"{(cost.execute - cost.snapshot) * 1e6 / cost.ops:.0f}",
                 f"{cost.snapshot * 1e6 / cost.ops:.0f}", f"{cost.oracle * 1e6 / cost.ops:.0f}",
                 f"{cost.bare * 1e6 / cost.ops:.1f}", f"{cost.check_ratio:.1f}"])
    _table(["run", "steps", "steps/s (wall)", "hypothesis", "calls us", "snapshot us",
            "check us", "bare us", "check/bare"], rows)
    _print("  (CPU time per step: calls = the runner interpreting call plans; snapshot = "
           "reading the allocator; check = model + shadow memory on the recorded steps and "
           "bare = the same calls compiled, each best of 3 with the collector off; "
           "hypothesis = share of the run outside calls and checks)")
    worst = max(cost.check_ratio, *(r.check_ratio for r in runs))
    met = worst <= WANT_CHECK_RATIO
    _print(_verdict(met, f"model + shadow <= {WANT_CHECK_RATIO:g}x the bare allocator",
                    f"machines {', '.join(f'{r.check_ratio:.1f}x' for r in runs)}; small "
                    f"trace {cost.check_ratio:.1f}x"))
    result: dict[str, Any] = {
        "machines": [r.as_dict() for r in runs],
        "small_trace": {"config": asdict(sc), **cost.as_dict()},
        "target": {"want": f"<= {WANT_CHECK_RATIO}", "machines": [r.check_ratio for r in runs],
                   "small_trace": cost.check_ratio, "met": met},
    }
    if not met:
        result["profiles"] = _suite_profiles(runs, ours, mode)
    _print()
    result["zoo"] = section_zoo(mode)
    return result


def _suite_profiles(runs: Sequence[suite_speed.MachineRun], ours: Target,
                    mode: Mode) -> list[dict[str, Any]]:
    programs = [p for r in runs for p in r.programs[:20]]

    def replay() -> None:
        for config, log in programs:
            suite_speed.judge_log(ours, config, log)

    out = [_print_profile(f"judging {len(programs)} of the machines' examples again (runner + "
                          "oracle, no Hypothesis)", profiling.profile(replay),
                          SUITE_CODE, 10)]
    examples = max(2, mode.machine_examples // 4)
    out.append(_print_profile(
        f"one sequence-machine run ({examples} examples, Hypothesis included)",
        profiling.profile(lambda: suite_speed.run_machine("sequence", ours, examples,
                                                          mode.machine_steps, repeats=0)),
        None, 8))
    return out


def section_zoo(mode: Mode) -> dict[str, Any]:
    try:
        zoo = zoo_catch.load_zoo()
        budgets = zoo_catch.schedules(mode.zoo_examples, mode.machine_steps)
    except zoo_catch.ZooMissing as exc:
        _print(f"SKIPPED: the self-test zoo is not there yet ({exc})")
        return {"skipped": str(exc)}
    schedule = ", ".join(f"{b.max_examples} examples x {b.steps} steps seed {b.seed}"
                         for b in budgets)
    _print(f"-- time to catch each mutant of the zoo (schedules: {schedule}; the next only "
           "if the first missed; each search in a fresh process, no Hypothesis shrinking)")
    catches = zoo_catch.catch_all(zoo, budgets, mode.zoo_only, mode.zoo_budget_s)
    rows = []
    for c in catches:
        fam = "-" if c.family is None else c.family + ("" if c.expected_family else " (!)")
        rows.append([c.name, c.caught_by or "NOT CAUGHT", fam,
                     "-" if c.examples is None else str(c.examples),
                     "-" if c.detect_s is None else f"{c.detect_s:.2f}",
                     f"{c.total_s:.2f}" if c.total_s else "-",
                     "-" if c.steps is None else str(c.steps)])
    _table(["mutant", "caught by", "family", "example", "detect s", "total s", "steps"], rows)
    caught = [c for c in catches if c.caught_by]
    odd = [c for c in caught if not c.expected_family]
    missed = [c for c in catches if not c.caught_by]
    summary = f"  {len(caught)}/{len(catches)} caught"
    if caught:
        steps = sorted(c.steps for c in caught if c.steps is not None)
        summary += (f"; slowest {max(c.total_s for c in caught):.1f} s, median "
                    f"{statistics.median(c.total_s for c in caught):.1f} s; shrunk "
                    f"counterexamples median {statistics.median(steps):g} steps, longest "
                    f"{steps[-1]}" if steps else "")
    _print(summary + ". Wall seconds; detect = the catching search's start to its first "
           "violation; total = the mutant's every search plus shrinking; example = which "
           "example of the catching search failed; (!) = a family the zoo does not list for "
           "that mutant (tests/test_zoo.py accepts some on documented grounds)")
    for c in missed:
        _print(f"  not caught: {c.name}: {c.note}")
    return {"schedules": [{"max_examples": b.max_examples, "steps": b.steps, "seed": b.seed}
                          for b in budgets],
            "mutants": [c.as_dict() for c in catches], "caught": len(caught),
            "unexpected_family": [c.name for c in odd], "missed": [c.name for c in missed]}


# --------------------------------------------------------------------------- main


def _finite(value: Any) -> Any:
    """``value`` with every infinite or NaN float replaced by None (strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


SECTIONS: dict[str, Callable[[Mode, Target, dict[str, Target], dict[str, str]],
                              dict[str, Any]]] = {
    "throughput": section_throughput,
    "ops": section_ops,
    "scaling": lambda mode, ours, _theirs, _why: section_scaling(mode, ours),
    "suite": lambda mode, ours, _theirs, _why: section_suite(mode, ours),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small budgets (< 30 s)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON file ({RESULTS})")
    parser.add_argument("--sections", nargs="+", default=["throughput", "scaling", "suite"],
                        choices=list(SECTIONS),
                        help="ops = the per-operation table at two scales")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the throughput trace's request count")
    parser.add_argument("--repeats", type=int, default=None, help="timing repeats")
    parser.add_argument("--zoo-examples", type=int, default=None,
                        help="examples per schedule for each mutant (default: the zoo's own "
                             "schedules, as tests/test_zoo.py runs them)")
    parser.add_argument("--zoo-budget", type=float, default=None,
                        help="wall seconds for the whole zoo section")
    parser.add_argument("--no-fetch", action="store_true",
                        help="do not download an upstream release that is not cached "
                             "(vllm-block, Aphrodite, vLLM v1)")
    args = parser.parse_args(argv)
    mode = QUICK if args.quick else DEFAULT
    mode = replace(mode, trace=mode.trace.scaled(args.scale),
                   ops_small=mode.ops_small.scaled(args.scale),
                   ops_large=mode.ops_large.scaled(args.scale))
    if args.repeats is not None:
        mode = replace(mode, repeats=args.repeats, scaling_repeats=args.repeats)
    if args.zoo_examples is not None:
        mode = replace(mode, zoo_examples=args.zoo_examples)
    if args.zoo_budget is not None:
        mode = replace(mode, zoo_budget_s=args.zoo_budget)

    started, started_cpu = time.perf_counter(), time.process_time()
    load_before = os.getloadavg()
    ours, upstream, missing = load_targets(fetch=not args.no_fetch)
    v1_target: Any = None
    v1_missing: dict[str, str] = {}
    if "ops" in args.sections:
        v1_target, why = load_v1_target(fetch=not args.no_fetch)
        if why is not None:
            v1_missing[V1_LABEL] = why
    columns = ", ".join([*(f"{k} = {_label(t)}" for k, t in upstream.items()),
                         *(f"{k} unavailable" for k in missing)])
    if "ops" in args.sections:
        columns += (f"; {V1_LABEL} = {v1_target.name} {v1_target.version} (ops only)"
                    if v1_target is not None else f"; {V1_LABEL} unavailable")
    _print(f"prefixcache benchmarks ({mode.name} mode): ours = {_label(ours)}; {columns}; "
           f"clock = {CLOCK.__name__}; "
           f"load average {load_before[0]:.2f} on {os.cpu_count()} CPUs")
    if load_before[0] > (os.cpu_count() or 1):
        _print("WARNING: the machine is busy; CPU times still inflate through shared caches, so "
               "small ratios (the micro-benchmark steps above all) are noisy")
    _print()
    command = sys.argv[1:] if argv is None else list(argv)
    results: dict[str, Any] = {"meta": {
        "mode": mode.name, "command": " ".join(["python -m benchmarks", *command]),
        "python": platform.python_version(), "platform": platform.platform(),
        "cpus": os.cpu_count(), "clock": CLOCK.__name__, "started": time.time(),
        "load_average_before": load_before, "sections_s": {},
    }}
    for name in args.sections:
        wall, cpu = time.perf_counter(), time.process_time()
        with suite_speed.quiet():  # the allocator's warnings (refused resets) are noise here
            if name == "ops":
                results[name] = section_ops(mode, ours, upstream, {**missing, **v1_missing},
                                            v1=v1_target)
            else:
                results[name] = SECTIONS[name](mode, ours, upstream, missing)
        spent = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}
        results["meta"]["sections_s"][name] = spent
        _print(f"[{name}: {spent['wall']:.0f} s wall, {spent['cpu']:.0f} s CPU]")
        _print()
    elapsed = time.perf_counter() - started
    results["meta"].update(wall_s=elapsed, cpu_s=time.process_time() - started_cpu,
                           load_average_after=os.getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(_finite(results), indent=1, default=str, allow_nan=False)
                        + "\n", encoding="utf-8")
    _print(f"done in {elapsed:.0f} s wall ({results['meta']['cpu_s']:.0f} s CPU); load average "
           f"now {os.getloadavg()[0]:.2f}; results in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
