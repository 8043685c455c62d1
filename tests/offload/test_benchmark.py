"""Smoke test of ``benchmarks.offload_trace``: the trace is deterministic, replays on the
bundled manager without error, and (with the wheel) upstream 0.34.0 reproduces every recorded
outcome, the condition under which its timings compare like with like."""

from __future__ import annotations

import pytest

from benchmarks import offload_trace as bench
from prefixcache.v1.kv_offload import base
from prefixcache.v1.kv_offload.cpu.manager import CPUOffloadingManager
from properties.families.offload import upstream as up


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_trace_is_deterministic_and_replays(policy: str) -> None:
    first = bench.generate(3, 60, 48, 4, 4, 6, policy)
    assert first == bench.generate(3, 60, 48, 4, 4, 6, policy)
    calls, positions, chunks = first
    assert any(c[0] == bench.STORE and c[3] is not None and c[3][1] for c in calls)  # evicts
    manager = CPUOffloadingManager(chunks, cache_policy=policy)
    assert bench.verify(manager, bench._contexts(base, positions), calls) == 0
    if up.cached_wheel("0.34.0") is None:
        pytest.skip(f"no vllm 0.34.0 wheel cached: run `{up.FETCH_COMMAND} --version 0.34.0`")
    mods = up.load_vllm_offload(version="0.34.0")
    theirs = up.new_manager(mods, chunks, cache_policy=policy, enable_events=False)
    assert bench.verify(theirs, bench._contexts(mods.types, positions), calls) == 0


def test_main_reports_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--requests", "40", "--chunks", "32", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "bundled lru" in out and "bundled arc" in out
