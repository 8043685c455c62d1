"""Robustness findings (:mod:`properties.core.robustness`): misuse a target accepts is listed
by ``prefixcache check`` in its own section with a script that replays it, never as a
deviation, and fails the check only under ``--strict-robustness``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from properties.core import robustness
from properties.families.v1 import upstream
from tests.check.test_cli import check

ROOT = Path(__file__).resolve().parents[2]
BUDGET = ("--profile", "ci", "--max-examples", "40", "--max-steps", "30")
V033 = "properties.upstream:vllm_v033_block_pool"

needs_wheel = pytest.mark.skipif(
    upstream.cached_wheel("0.33.0") is None and not os.environ.get(upstream.SOURCE_ENV),
    reason="no vllm 0.33.0 wheel cached (`python -m properties.upstream fetch vllm-v1 "
           "--version 0.33.0`)")


def test_findings_are_kept_once_per_target_and_kind() -> None:
    robustness.take()
    first = robustness.Finding("t", "double_free", "ref_cnt went to -1", "script")
    assert robustness.report(first)
    assert not robustness.report(robustness.Finding("t", "double_free", "again"))
    assert robustness.known("t", "double_free") and not robustness.known("t", "other")
    assert robustness.take() == [first] and robustness.take() == []
    session: dict[str, robustness.Finding] = {}
    robustness.merge(session, [first, robustness.Finding("t", "double_free", "later")])
    assert list(session.values()) == [first]
    assert robustness.Finding.from_json(first.to_json()) == first


def test_the_bundled_pool_has_none(tmp_path: Path) -> None:
    code, out, data = check(tmp_path, "--family", "v1", *BUDGET)
    assert code == 0, out
    assert data["robustness"] == [] and "robustness finding" not in out


@needs_wheel
def test_vllm_033_double_free_and_negative_count_are_listed_with_scripts(tmp_path: Path
                                                                         ) -> None:
    xfails = str(ROOT / "conformance" / "vllm-0.33.xfails.json")
    code, out, data = check(tmp_path, "--allocator", V033, "--xfails-file", xfails, *BUDGET)
    assert code == 0, out  # findings alone do not fail the check
    found = {f["kind"]: f for f in data["robustness"]}
    assert {"double_free", "negative_count"} <= set(found), out
    assert "robustness finding(s)" in out
    for kind in ("double_free", "negative_count"):
        script = tmp_path / f"{kind}.py"
        script.write_text(found[kind]["script"], encoding="utf-8")
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300,
                             check=False)
        assert run.returncode == 0, run.stderr
        lines = run.stdout.splitlines()
        refs = [line for line in lines if line.startswith("ref_cnt")]
        free = [int(line.split()[1]) for line in lines if line.startswith("num_free")]
        if kind == "double_free":  # the misuse leaves a reference count of -1
            assert "-1" not in refs[-2] and "-1" in refs[-1], run.stdout
        else:  # a negative count hands out nothing and inflates the free count
            assert free[-1] > free[-2], run.stdout
    strict = tmp_path / "strict"
    strict.mkdir()
    code, out, _ = check(strict, "--allocator", V033, "--xfails-file", xfails,
                         "--strict-robustness", *BUDGET)
    assert code == 1, out
