"""The offload family through the core: it fills the interface with the roles it takes, its
operations round-trip through JSON, it recognises offload managers without building one, and
``prefixcache check --family offload`` conforms on the bundled manager and catches a mutant
with a replayable program."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from models.families.offload import ops as o
from properties.core import cli
from properties.core import family as families
from properties.core.roles import (
    Building,
    HandleShrinking,
    PoolShrinking,
    Tolerating,
    Variants,
)
from properties.core.targets import TargetError
from properties.families.offload.family import FAMILY, REF

ROOT = Path(__file__).resolve().parents[2]
BUDGET = ["--max-examples", "60", "--max-steps", "30"]


def test_the_family_fills_the_interface_and_only_its_roles() -> None:
    assert families.by_name(REF) is FAMILY
    assert isinstance(FAMILY, PoolShrinking | Variants)
    assert not isinstance(FAMILY, Building | HandleShrinking | Tolerating)
    assert FAMILY.allocator_types == ("lru", "arc")  # type: ignore[attr-defined]
    assert [i.value for i in FAMILY.invariants] == [
        "CRASH", "TARGET", "ATOMIC", "CONTENT", "HIT", "PINNED", "ACCOUNT", "RESET", "ADMIT",
        "ORDER", "EVENTS"]


@pytest.mark.parametrize("op", [
    o.NewRequest(1, False), o.Lookup(0, 3), o.PrepareLoad(2, (1, 7)), o.CompleteLoad(2, (1,)),
    o.PrepareStore(0, (0, 6)), o.CompleteStore(0, (0,), False), o.Finish(3), o.Reset(),
    o.Flushed(), o.TakeEvents()])
def test_operations_round_trip_through_json(op: o.Op) -> None:
    data = FAMILY.vocabulary.op_to_json(op)
    assert "kind" not in data and FAMILY.vocabulary.op_from_json(json.loads(json.dumps(data))) == op


def test_detection_reads_the_api_only() -> None:
    assert FAMILY.accepts("prefixcache.v1.kv_offload.cpu.manager:CPUOffloadingManager")
    assert FAMILY.accepts("properties.upstream:vllm_cpu_offload")
    assert not FAMILY.accepts("prefixcache.v1.core.block_pool:BlockPool")
    assert not FAMILY.accepts("no.such.module:Manager")
    with pytest.raises(TargetError, match="allocator type"):
        FAMILY.load_target(None, families.TargetOptions(allocator_type="fifo"))


def _check(tmp_path: Path, *extra: str) -> tuple[int, dict[str, object], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), families.ENV_VAR: f"offload={REF}"}
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "properties.core.cli", "check", "--family",
                           "offload", "--report-dir", str(out), *BUDGET, *extra], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    data = json.loads((out / "conformance.json").read_text(encoding="utf-8"))
    return proc.returncode, data, proc.stdout + proc.stderr


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_the_bundled_manager_conforms(policy: str, tmp_path: Path) -> None:
    status, report, out = _check(tmp_path, "--allocator-type", policy)
    assert status == cli.EXIT_CONFORMS, out
    assert set(report["families"].values()) == {"pass"}  # type: ignore[union-attr]


def test_a_mutant_is_caught_with_a_replayable_script(tmp_path: Path) -> None:
    status, report, out = _check(tmp_path, "--allocator",
                                 "tests.zoo.offload.mutants:pending_reads_as_hit")
    assert status == cli.EXIT_DEVIATIONS, out
    findings = report["findings"]
    assert isinstance(findings, list) and {f["family"] for f in findings} == {"HIT"}
    script = tmp_path / "repro.py"
    script.write_text(findings[0]["script"], encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode != 0 and "[HIT]" in run.stderr, run.stdout + run.stderr


def test_a_step_past_its_time_limit_is_a_target_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from models.core.invariants import Violation
    from properties.core.targets import load_target

    target = load_target(family=REF, step_timeout=0.3)
    judge = FAMILY.judge(target, o.OffloadConfig(2))
    monkeypatch.setattr(type(judge.tier.manager), "prepare_store",
                        lambda self, *args: time.sleep(3))
    with pytest.raises(Violation, match=r"\[TARGET\] prepare_store exceeded") as info:
        judge.step(o.PrepareStore(0, (1,)))
    assert info.value.step == 0 and judge.log[-1].op == o.PrepareStore(0, (1,))
