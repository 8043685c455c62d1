"""The ops section's vllm-v1 column (``benchmarks.v1_on_v0_trace``): the v0 serving trace
replayed on a v1 ``BlockPool`` raises nothing, its free-count check passes, and a wrong shim
state fails it; the section prints the column, or the SKIPPED line when the wheel is missing."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks import run
from benchmarks import v1_on_v0_trace as v1
from benchmarks.serving_trace import Trace, generate
from properties.families.v1 import targets
from properties.families.v1 import upstream as v1_upstream

TINY = replace(run.SMALL_TRACE, num_requests=14)  # forks, swaps, lookahead, tiny blocks

needs_wheel = pytest.mark.skipif(
    v1_upstream.cached_wheel(run.V1_COLUMN_VERSION) is None,
    reason=f"vllm {run.V1_COLUMN_VERSION} wheel not cached: run "
           f"`{v1_upstream.FETCH_COMMAND} --version {run.V1_COLUMN_VERSION}`")


@pytest.fixture(scope="module")
def trace() -> Trace:
    return generate(TINY)


def _replay(trace: Trace, spec: str = targets.DEFAULT_SPEC,
            ) -> tuple[v1.V1Program, dict[str, Any], list[int]]:
    target = targets.load(spec)
    return v1.size_pool(trace, v1.env_factory(target, trace.config.block_size))


def _live(env: dict[str, Any]) -> list[v1.V1Table]:
    return [t for k, t in env.items() if isinstance(t, v1.V1Table) and t.blocks]


def test_the_trace_exercises_every_mapped_kind(trace: Trace) -> None:
    counts = trace.op_counts()
    assert all(counts[kind] for kind in (*v1.COMPARABLE, "table_swap"))


def test_bundled_pool_replays_the_trace_and_validates(trace: Trace) -> None:
    program, env, refused = _replay(trace)
    assert not refused  # the trace's own GPU pool size is enough at this scale
    result = v1.check(env, program.num_blocks)
    assert result.ok, result.error
    assert result.held > 0 and result.live_tables == len(_live(env))
    assert result.free == program.num_blocks - 1 - result.held
    timing = v1.compare(program, 1)
    assert set(v1.COMPARABLE) <= set(timing.per_kind_s)
    assert {"table_allocate", "table_append"} <= set(timing.hash_s)
    assert not set(timing.per_kind_s) & {"clear_cows", "mark_computed", "table_mark_accessed"}
    assert timing.comparable_s() > 0 and timing.total_s > 0


def test_a_wrong_shim_state_fails_the_check(trace: Trace) -> None:
    program, env, _ = _replay(trace)
    table = _live(env)[0]
    table.blocks.pop()  # a block the pool still counts as held, no table holds
    result = v1.check(env, program.num_blocks)
    assert not result.ok and "free count" in (result.error or "")

    program, env, _ = _replay(trace)
    table = _live(env)[0]
    table.blocks.append(table.blocks[-1])  # held twice by one table, ref_cnt once
    result = v1.check(env, program.num_blocks)
    assert not result.ok and "ref_cnt" in (result.error or "")


def test_a_pool_too_small_for_v1_grows_until_it_never_refuses(trace: Trace) -> None:
    small = replace(trace, config=replace(trace.config, num_gpu_blocks=12))
    program, env, refused = _replay(small)
    assert refused and refused[0] == 12 and program.num_blocks > refused[-1]
    assert v1.check(env, program.num_blocks).ok


@needs_wheel
def test_upstream_pool_replays_the_trace_and_validates(trace: Trace) -> None:
    program, env, _ = _replay(trace, targets.UPSTREAM_SPEC)
    result = v1.check(env, program.num_blocks)
    assert result.ok, result.error
    bundled, mine, _ = _replay(trace)
    assert bundled.num_blocks == program.num_blocks
    assert v1.check(mine, program.num_blocks).free == result.free  # the same pool contract


def test_ops_section_reports_the_column_or_why_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "results.json"
    if v1_upstream.cached_wheel(run.V1_COLUMN_VERSION) is None:
        pytest.skip(f"vllm {run.V1_COLUMN_VERSION} wheel not cached")
    assert run.main(["--quick", "--no-fetch", "--sections", "ops", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "vllm-v1 us/unit" in text and "vllm-v1/ours" in text and "n/a" in text
    assert "validation (vllm-v1" in text and "target: whole trace >= 4x faster" in text
    assert "ours >= 10x" not in text
    small = json.loads(out.read_text())["ops"]["small"]
    assert small["vllm-v1"]["validation"]["ok"]
    assert set(v1.COMPARABLE) <= set(small["vllm-v1"]["timing"]["per_kind_s"])

    monkeypatch.setattr(v1_upstream, "cached_wheel", lambda version="": None)
    monkeypatch.delenv(v1_upstream.SOURCE_ENV, raising=False)
    assert run.main(["--quick", "--no-fetch", "--sections", "ops", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "SKIPPED the vllm-v1 column: " in text and v1_upstream.FETCH_COMMAND in text
    assert "vllm-v1 us/unit" not in text
