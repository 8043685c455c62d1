"""Smoke tests of the benchmarks: the serving trace is deterministic and in contract (the oracle
judges it step by step at small scale), compiled programs agree with the allocator's own
free counts, and ``python -m benchmarks --quick`` produces a sane report."""

from __future__ import annotations

import contextlib
import json
import math
import random
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks import floor, run, trace_speed
from benchmarks.compiled import clock_overhead_ns, compile_table_program, no_gc
from benchmarks.serving_trace import Trace, TraceConfig, generate
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config, tolerating
from properties.core.plugin import load_expected, tolerated_by
from properties.core.replay import run_program
from properties.core.targets import Target, load_target

SMALL = replace(run.SMALL_TRACE, num_requests=14)


VLLM_XFAILS = Path(__file__).resolve().parents[2] / "conformance" / "vllm-0.8.xfails.json"


def _vllm() -> Target:
    """vLLM 0.8, judged with its xfails entries' tolerated deviations (its swap-ins count as
    cache queries: ``swap-in-counts-hits``), as the CI conformance run judges it."""
    try:
        target = load_target(run.VLLM_SPEC)
    except Exception as exc:  # the wheel is fetched by `python -m properties.upstream fetch`
        pytest.skip(f"vLLM 0.8 allocator unavailable: {exc}")
    tolerated = tolerated_by(load_expected(str(VLLM_XFAILS)))
    return replace(target, caps=tolerating(target.caps, tolerated))


def _config(trace_config: TraceConfig, target: Target) -> Config:
    c = trace_config
    return Config(c.block_size, c.num_gpu_blocks, c.num_cpu_blocks, target.caps)


# --------------------------------------------------------------------------- the trace


def test_trace_is_deterministic() -> None:
    first, again = generate(SMALL), generate(SMALL)
    assert first.program == again.program
    assert (first.steps, first.worst_free, first.stats) == (again.steps, again.worst_free,
                                                            again.stats)
    assert generate(replace(SMALL, seed=SMALL.seed + 1)).program != first.program


def test_trace_exercises_the_serving_mix() -> None:
    trace = generate(run.SMALL_TRACE)
    kinds = trace.op_counts()
    for kind in ("table_allocate", "table_append", "table_fork", "table_free", "table_swap",
                 "table_mark_accessed", "mark_computed", "clear_cows"):
        assert kinds[kind] > 0, kind
    swaps = [op for op in trace.program if isinstance(op, ops.TableSwap)]
    assert {(op.src, op.dst) for op in swaps} == {(ops.Dev.GPU, ops.Dev.CPU),
                                                   (ops.Dev.CPU, ops.Dev.GPU)}
    appends = [op for op in trace.program if isinstance(op, ops.TableAppend)]
    assert any(op.lookahead for op in appends) and any(not op.lookahead for op in appends)
    assert trace.stats["cows"] > 0 and trace.stats["follow_ups"] > 0
    # Requests share system prompts: many allocations start with the same tokens.
    heads = [op.tokens[:8] for op in trace.program if isinstance(op, ops.TableAllocate)]
    assert len(set(heads)) < len(heads)


@pytest.mark.parametrize("cpu_evictions", [False, True])
def test_small_trace_passes_the_oracle(cpu_evictions: bool) -> None:
    config = replace(SMALL, cpu_evictions=cpu_evictions)
    trace = generate(config)
    target = load_target()
    runner = run_program(target, _config(config, target), trace.program)  # raises a Violation
    assert all(step.outcome.error is None for step in runner.log)
    assert len(runner.log) == len(trace.program)


def test_small_trace_passes_the_oracle_on_vllm() -> None:
    target = _vllm()
    trace = generate(SMALL)
    runner = run_program(target, _config(SMALL, target), trace.program)
    assert all(step.outcome.error is None for step in runner.log)


# --------------------------------------------------------------------------- compiled runs


def test_compiled_runs_agree_and_respect_the_ledger() -> None:
    trace = generate(run.SMALL_TRACE)
    targets = {"ours": load_target()}
    with contextlib.suppress(Exception):  # without vLLM, ours alone still checks the bound
        targets["vllm"] = load_target(run.VLLM_SPEC)
    programs = trace_speed.compile_all(trace, targets, chunk=40)  # many comparison points
    check, seconds = trace_speed.validate(trace, programs)
    assert check.ok, check.as_dict()
    assert set(seconds) == set(targets) and all(s > 0 for s in seconds.values())
    # Chunks end at scheduling-step boundaries, so every comparison point is one.
    assert check.points > len(trace.steps) // 4
    assert set(programs["ours"].ends) <= set(trace.steps)
    # The final state is not trivially empty: sequences are still running.
    assert trace.stats["running_at_end"] > 0
    gpu_free, cpu_free = check.final["ours"]
    assert gpu_free < trace.config.num_gpu_blocks
    assert cpu_free == trace.config.num_cpu_blocks  # CPU-resident sequences were aborted


def test_validation_names_the_operation_that_failed() -> None:
    program = (ops.TableAllocate((1, 2, 3)), ops.TableFree(0), ops.TableAppend(0, (4,)))
    trace = Trace(replace(SMALL, num_gpu_blocks=4, num_cpu_blocks=0), program, (3,),
                  ((0, 0),), {})
    check, seconds = trace_speed.validate(trace, trace_speed.compile_all(trace, {
        "ours": load_target()}))
    assert not check.ok and seconds == {}
    assert check.error is not None
    assert check.error.startswith("ours: operation 2 (table_append) raised")


def test_timed_run_accounts_for_every_operation() -> None:
    trace = generate(SMALL)
    target = load_target()
    program = compile_table_program(target, _config(SMALL, target), trace.program)
    per_kind = program.run_timed(clock_overhead_ns(2_000))
    assert set(per_kind) == set(trace.op_counts())
    assert all(seconds >= 0 for seconds in per_kind.values())
    assert program.run_plain() > 0


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.mark.parametrize("variant", ["plain", "timed"])
def test_runs_start_without_earlier_runs_garbage(variant: str) -> None:
    """A dead allocator's cycles from an earlier run are collected before the next run (the
    collector is off during runs, and a heap grown by them slows whatever runs next)."""
    trace = generate(SMALL)
    target = load_target()
    program = compile_table_program(target, _config(SMALL, target), trace.program)
    garbage = _Cycle()
    alive = weakref.ref(garbage)
    del garbage
    with no_gc():
        assert alive() is not None  # only the collector frees it
        seen: list[bool] = []
        if variant == "plain":
            program.run_plain(after_chunk=lambda end, env: seen.append(alive() is None))
            assert seen and all(seen)
        else:
            program.run_timed(clock_overhead_ns(2_000))
            assert alive() is None


def test_keying_floor_computes_the_allocators_content_keys() -> None:
    """The ``calls + keys`` floor does the keying work the allocator must do, no less: after
    the whole trace, every live table's chain key is the content hash of the allocator's last
    full block of that table (forks, copy-on-write, swaps and frees included)."""
    trace = generate(run.SMALL_TRACE)
    target = load_target()
    program = compile_table_program(target, _config(run.SMALL_TRACE, target), trace.program)
    real = program.fresh_env()
    keyed = floor.floor_env(floor.FLOORS["calls + keys"])()
    plain = floor.floor_env(floor.FLOORS["calls"])()
    for code in program.plain:
        exec(code, real)
        exec(code, keyed)
        exec(code, plain)
    compared = 0
    size = run.SMALL_TRACE.block_size
    for name, table in real.items():
        if not (name.startswith("t") and name[1:].isdigit()) or not table.blocks:
            continue
        full = table.num_full_slots // size
        expected = table.blocks[full - 1].content_hash if full else None
        assert keyed[name]._prev == expected, name
        compared += full > 0
    assert compared > 5
    assert program.run_plain(env=floor.floor_env(floor.FLOORS["calls"])()) > 0


# --------------------------------------------------------------------------- quick mode


def _finite_positive(value: Any) -> bool:
    return isinstance(value, int | float) and value > 0 and math.isfinite(value)


def test_quick_mode_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.json"
    assert run.main(["--quick", "--no-fetch", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for title in ("== 1. Throughput", "== 2. Per-operation cost", "== 3. Suite speed",
                  "time to catch each mutant"):
        assert title in printed
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["meta"]["mode"] == "quick"

    throughput = results["throughput"]
    assert throughput["validation"]["ok"]
    counts = throughput["trace"]["op_counts"]
    assert sum(counts.values()) == throughput["trace"]["operations"]
    ours = throughput["timings"]["ours"]
    assert _finite_positive(ours["total_s"])
    assert set(ours["per_kind_s"]) == set(counts)
    if throughput["targets"]["vllm"] is not None:
        assert _finite_positive(throughput["ratio_vllm_over_ours"]["total"])
        assert isinstance(throughput["target"]["met"], bool)

    scaling = results["scaling"]
    assert scaling["micro"]["sizes"] == list(run.QUICK.scaling_sizes)
    for times in [*scaling["micro"]["ns_per_op"].values(),
                  scaling["trace"]["ns_per_op"]["all operations"]]:
        assert len(times) == len(run.QUICK.scaling_sizes)
        assert all(_finite_positive(t) for t in times)

    suite = results["suite"]
    for machine in suite["machines"]:
        assert machine["steps"] > 0 and machine["examples"] > 0
        assert _finite_positive(machine["steps_per_second"])
        assert _finite_positive(machine["check_ratio"])
    assert _finite_positive(suite["small_trace"]["check_ratio"])
    zoo = suite["zoo"]
    if "skipped" not in zoo:
        assert {m["name"] for m in zoo["mutants"]} <= set(run.QUICK.zoo_only or ())
        for mutant in zoo["mutants"]:
            assert (mutant["caught_by"] is None) == (mutant["detect_s"] is None)
        by_name = {m["name"]: m for m in zoo["mutants"]}
        chain = by_name["recursive_fork"]  # the long-chain program: caught on any budget
        assert chain["caught_by"] == "long_chain seed 0" and chain["family"] == "TABLE"
        assert chain["expected_family"] and chain["steps"] >= 1


# --------------------------------------------------------------------------- pool scaling


def _handed_out(name: str, n: int, k: int) -> list[int | None]:
    """The ids the allocator really touches in step ``name`` (for the steps whose sequence
    the memory baseline derives rather than reads off the setup)."""
    from benchmarks import bench_allocator_scaling as bench
    from prefixcache import PrefixCachingBlockAllocator

    if name.startswith("evict"):
        alloc = bench._filled_evictor(n, random.Random(n), shuffled="out of order" in name)
        return [alloc.allocate_mutable_block(None).block_id for _ in range(k)]
    fresh = PrefixCachingBlockAllocator(n, bench.BLOCK_SIZE)
    if name == "allocate mutable":
        return [fresh.allocate_mutable_block(None).block_id for _ in range(k)]
    if name == "allocate immutable (miss)":
        return [fresh.allocate_immutable_block(None, bench._tokens(i)).block_id
                for i in range(k)]
    raise KeyError(name)


@pytest.mark.parametrize("name", ["evict (times out of order)", "evict (times in order)",
                                  "allocate mutable", "allocate immutable (miss)"])
def test_memory_baseline_replays_the_allocators_id_sequence(name: str) -> None:
    from benchmarks.memory_baseline import pattern

    n, k = 64, 40
    assert pattern(name, n, k).ids == _handed_out(name, n, k)


def test_every_step_has_a_baseline_of_the_same_shape() -> None:
    from benchmarks.bench_allocator_scaling import STEPS
    from benchmarks.memory_baseline import BASELINES, pattern

    assert set(BASELINES) == set(STEPS)
    for name, step in STEPS.items():
        _, step_ops = step(64, 16)
        run, base_ops = BASELINES[name](64, 16)
        run()
        assert base_ops == step_ops, name
        p = pattern(name, 64, 16)
        assert len(p.ids) == p.ops * p.per_op and set(p.ids) <= set(p.id_keys), name


def test_scaling_result_normalises_by_the_baseline() -> None:
    from benchmarks.pool_scaling import ScalingResult, measure_steps

    made = ScalingResult((1, 2), {"a": [100.0, 150.0]}, {"a": [10.0, 12.0]},
                         {"a": [[100.0, 120.0, 300.0], [150.0, 150.0, 450.0]]})
    assert made.ratios()["a"] == [1.0, 1.5]
    assert made.baseline_ratios()["a"] == [1.0, 1.2]
    assert made.normalised()["a"] == pytest.approx([1.0, 1.25])
    assert made.excess()["a"] == pytest.approx([1.0, 138.0 / 90.0])
    assert made.spread()["a"] == [1.2, 1.0]
    assert made.paired()["a"] == [[1.0, 1.0, 1.0], [1.5, 1.25, 1.5]]
    worst_name, worst = made.worst("normalised")
    assert worst_name == "a" and worst == pytest.approx(1.25)
    measured = measure_steps((32, 64), 16, 2, ["get_physical_block_id"])
    assert set(measured.ns) == set(measured.baseline) == {"get_physical_block_id"}
    assert all(len(runs) == 2 for runs in measured.samples["get_physical_block_id"])
    assert all(_finite_positive(t) for t in [*measured.ns["get_physical_block_id"],
                                            *measured.baseline["get_physical_block_id"]])


def test_baseline_heap_pops_in_the_evictors_order() -> None:
    import heapq

    from benchmarks.memory_baseline import Lookup, heap_key, pattern

    p = pattern("evict (times out of order)", 64, 40)
    assert p.lookup is Lookup.HEAP_POP
    heap = [heap_key(i, p.times[i]) for i in p.heap_ids]
    heapq.heapify(heap)
    assert [heapq.heappop(heap) & ((1 << 64) - 1) for _ in range(40)] == p.ids


# --------------------------------------------------------------------------- upstream columns


@pytest.mark.parametrize("fetch", [False, True])
def test_an_upstream_release_is_fetched_once_only_when_allowed(
    fetch: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A column whose release is not cached is fetched (once) and loaded when fetching is
    allowed; with ``--no-fetch`` it is left out, and the reason says so."""
    fetched: list[str] = []
    loads: list[str] = []

    def load(spec: str) -> Target:
        loads.append(spec)
        if not fetched:
            raise FileNotFoundError("no cached wheel")
        return load_target(run.DEFAULT_SPEC)

    monkeypatch.setattr(run, "load_target", load)
    target, why = run._load_upstream("some.module:factory", "Some allocator",
                                     lambda: fetched.append("wheel"), fetch)
    if fetch:
        assert target is not None and why == ""
        assert fetched == ["wheel"] and loads == ["some.module:factory"] * 2
    else:
        assert target is None and fetched == [] and loads == ["some.module:factory"]
        assert "Some allocator unavailable" in why and "no cached wheel" in why
        assert "--no-fetch" in why


def test_a_failed_fetch_names_the_fetch_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def load(spec: str) -> Target:
        raise FileNotFoundError("no cached wheel")

    def fail() -> None:
        raise OSError("index unreachable")

    monkeypatch.setattr(run, "load_target", load)
    target, why = run._load_upstream("some.module:factory", "Some allocator", fail, True)
    assert target is None
    assert "index unreachable" in why and "python -m properties.upstream fetch" in why
