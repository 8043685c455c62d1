"""The v1 request level through the core with a real manager (needs torch and the wheels; this
directory's conftest skips without them): the judge's contract, and ``prefixcache check`` on a
broken manager of the zoo: caught with short replayable programs and adopted with ``--all
--write-xfails``, every written entry reproducing in a fresh process (the core's replay marks
one that does not ``flaky``). That ``--xfails-file`` then accepts them is the core's own
mechanism, exercised end to end by ``tests/toy``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from models.core.invariants import Violation
from models.families.v1 import request_ops as ops
from properties.core import cli
from properties.core.reproducer import render_script
from properties.core.targets import load_target
from properties.families.v1.request.family import FAMILY, OutOfContract
from properties.families.v1.request.target import FULL

ROOT = Path(__file__).resolve().parents[3]
#: A short budget on the full-attention machine and the replays only: the zoo variant is met in
#: its first examples (CI runs every machine at the ci profile's budget on the real releases).
BUDGET = ["--max-examples", "5", "--max-steps", "30",
          "--pytest-args=-k 'TestFull or expected_failure'"]
BROKEN = "properties.families.v1.request.zoo:free_keeps_a_block"


def _check(tmp_path: Path, *extra: str) -> tuple[int, dict[str, object], str]:
    """``prefixcache check`` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "properties.core.cli", "check",
                           "--report-dir", str(out), *BUDGET, *extra], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    data = json.loads((out / "conformance.json").read_text(encoding="utf-8"))
    return proc.returncode, data, proc.stdout + proc.stderr


def test_the_judge_logs_every_step_and_refuses_what_it_cannot_judge() -> None:
    target = load_target("properties.upstream:vllm_v033_manager")
    judge = FAMILY.judge(target, FULL)
    assert judge.step(ops.Add((0, 1, 2, 0, 1))) == 0
    with pytest.raises(OutOfContract):
        judge.step(ops.Schedule(1, 4))  # no request 1
    judge.step(ops.Schedule(0, 4))
    with pytest.raises(OutOfContract):
        judge.step(ops.Abort(0))  # aborts come between steps
    with pytest.raises(Violation) as info:  # the known 0.33.0 deviation (COMPUTED)
        judge.step(ops.Preempt(0))
    assert info.value.family == FAMILY.invariants.COMPUTED and info.value.step == 2
    assert [s.op.kind for s in judge.log] == ["add", "schedule", "preempt"]
    script = render_script(target, FULL, judge.log, info.value)
    assert "mgr.free(r0)  # preempted inside the step" in script
    assert "check_program('properties.upstream:vllm_v033_manager'" in script


def test_a_broken_manager_is_caught_and_adopted(tmp_path: Path) -> None:
    xfails = tmp_path / "broken.xfails.json"
    status, report, out = _check(tmp_path / "adopt", "--allocator", BROKEN, "--all",
                                 "--write-xfails", str(xfails))
    assert status == cli.EXIT_DEVIATIONS, out
    findings = report["findings"]
    assert isinstance(findings, list) and findings
    assert {f["family"] for f in findings} <= {"RC", "LEAK"}, findings
    assert all(len(f["program"]) <= 10 for f in findings), findings  # shrunk
    written = json.loads(xfails.read_text(encoding="utf-8"))
    assert len(written) == len(findings) and not any(e.get("flaky") for e in written), written
    assert all("mechanism" in e["match"] for e in written), written
