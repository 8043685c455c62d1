"""The toy family end to end through ``prefixcache check``: the bundled toy cache conforms,
each mutant is caught with the invariant it breaks, with a short replayable program, and the
family fills the core's interface with no role it does not take."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from properties.core import cli
from properties.core import family as families
from properties.core.roles import Building, HandleShrinking, PoolShrinking, Tolerating
from tests.toy.family import FAMILY, REF
from tests.toy.mutants import MUTANTS

ROOT = Path(__file__).resolve().parents[2]
#: Enough of the ci profile's budget to meet both mutants (each is met within its first
#: examples) while keeping the run short.
BUDGET = ["--max-examples", "60", "--max-steps", "30"]


def _check(tmp_path: Path, *extra: str) -> tuple[int, dict[str, object], str]:
    """``prefixcache check --family toy`` in a fresh process, the family declared by name."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), families.ENV_VAR: f"toy={REF}"}
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "properties.core.cli", "check", "--family",
                           "toy", "--report-dir", str(out), *BUDGET, *extra], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    data = json.loads((out / "conformance.json").read_text(encoding="utf-8"))
    return proc.returncode, data, proc.stdout + proc.stderr


def test_the_toy_family_fills_the_interface_and_only_its_roles() -> None:
    assert families.by_name(REF) is FAMILY and families.by_name("toy") is FAMILY
    assert isinstance(FAMILY, PoolShrinking)
    assert not isinstance(FAMILY, Building | HandleShrinking | Tolerating)
    assert [inv.value for inv in FAMILY.invariants] == [
        "CRASH", "TARGET", "ATOMIC", "CONTENT", "RC", "LEAK", "CACHE", "HIT"]


def test_the_bundled_toy_cache_conforms(tmp_path: Path) -> None:
    status, report, out = _check(tmp_path)
    assert status == cli.EXIT_CONFORMS, out
    assert report["verdict"] == "conforms"
    assert set(report["families"].values()) == {"pass"}  # type: ignore[union-attr]
    assert list(report["families"]) == [inv.value for inv in FAMILY.invariants]  # type: ignore[arg-type]


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_each_mutant_is_caught_with_its_invariant(mutant: str, tmp_path: Path) -> None:
    status, report, out = _check(tmp_path, "--allocator", f"tests.toy.mutants:{mutant}")
    assert status == cli.EXIT_DEVIATIONS, out
    findings = report["findings"]
    assert isinstance(findings, list) and findings
    assert {f["family"] for f in findings} == {MUTANTS[mutant][2]}
    assert all(len(f["program"]) <= 6 for f in findings), findings


def test_a_target_that_does_not_load_gets_no_verdict(tmp_path: Path) -> None:
    status, report, out = _check(tmp_path, "--allocator", "tests.toy.allocator:NoSuchCache")
    assert status == cli.EXIT_ERROR
    assert report["verdict"] == "not run" and report["families"] == {}
    assert "pass" not in out and "NoSuchCache" in out


def test_adopt_then_ratchet_works_for_the_toy_family(tmp_path: Path) -> None:
    """The core's --all, --write-xfails and --xfails-file, unchanged, on a family it does not
    know: the mutant's deviations are adopted, then only they remain (exit 0)."""
    xfails = tmp_path / "toy.xfails.json"
    mutant = ("--allocator", "tests.toy.mutants:evict_keeps_key", "--all")
    status, _, out = _check(tmp_path / "adopt", *mutant, "--write-xfails", str(xfails))
    assert status == cli.EXIT_DEVIATIONS, out
    written = json.loads(xfails.read_text(encoding="utf-8"))
    assert written and {e["family"] for e in written} == {"CACHE"}
    assert all("allocator_type" not in e and "allocator_types" not in e["match"]
               for e in written), written  # the toy's targets come in one variant
    status, _, out = _check(tmp_path / "ratchet", *mutant, "--xfails-file", str(xfails))
    assert status == cli.EXIT_CONFORMS, out
    # Entries for another release (``versions``) absorb nothing here, and their replays skip.
    other = tmp_path / "other-release.xfails.json"
    other.write_text(json.dumps([{**e, "versions": ["0.0.0-other"]} for e in written]),
                     encoding="utf-8")
    status, data, out = _check(tmp_path / "other", *mutant, "--xfails-file", str(other))
    assert status == cli.EXIT_DEVIATIONS, out
    replays = [t for t in data["tests"] if "test_expected_failure[" in t]
    assert replays and all(data["tests"][t] == "skipped" for t in replays), data["tests"]
