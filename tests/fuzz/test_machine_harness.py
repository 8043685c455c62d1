"""The fuzzers' one generator: a family written outside the package (the toy family) is
fuzzed through its Hypothesis machine, by the built-in engine and ``python -m fuzz run``; each
toy mutant is found with the invariant it breaks, the bundled toy cache is not, and a crash's
sidecar replays without the input; machines are found with no source file on disk (a zip, a
PyInstaller bundle)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fuzz.core.engine import Engine
from fuzz.core.machine_harness import (
    MachineHarness,
    harness_for,
    level_name,
    machine_level,
    machine_levels,
)
from models.core.invariants import Violation
from properties.core import family as families
from properties.core import selection
from properties.core.replay import check
from tests.toy.family import FAMILY, REF
from tests.toy.machines.test_toy import ToyMachine
from tests.toy.mutants import MUTANTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _kept_selection() -> object:
    """The harness selects its target for the machines; the session's selection survives."""
    with selection.kept():
        yield


def test_level_names_follow_the_test_names() -> None:
    assert level_name("TestToy") == "toy"
    assert level_name("TestBlockLevel") == "block_level"
    assert level_name("TestBlockLevelNaive") == "block_level_naive"


def test_the_toy_family_is_fuzzed_through_its_machine() -> None:
    levels = machine_levels(FAMILY)
    assert list(levels) == ["toy"] and levels["toy"].machine is ToyMachine
    with pytest.raises(ValueError, match="known: toy"):
        machine_level(FAMILY, "block_level")


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_each_toy_mutant_is_found_with_its_invariant(mutant: str) -> None:
    families.by_name(REF)
    harness = harness_for(None, spec=f"tests.toy.mutants:{mutant}", family="toy")
    engine = Engine(harness.run, harness.seeds(0), seed=0)
    stats = engine.fuzz(max_execs=400, stop_on_failure=True)
    assert stats.failures, f"{mutant} not found in {stats.execs} executions"
    result = stats.failures[0].result
    assert result.violation is not None
    assert result.violation.family.value == MUTANTS[mutant][2]
    assert result.program and result.config is not None
    # the sidecar is the program: it replays without the input, on the same mutant
    record = harness.crash_record(stats.failures[0].data, result)
    with pytest.raises(Violation) as caught:
        check(f"tests.toy.mutants:{mutant}", record["config"], record["program"], family=REF)
    assert caught.value.family.value == MUTANTS[mutant][2]


def test_the_bundled_toy_cache_is_not_reported() -> None:
    harness = harness_for(None, family=REF)
    engine = Engine(harness.run, harness.seeds(1), seed=1)
    stats = engine.fuzz(max_execs=300)
    assert stats.execs == 300 and not stats.failures
    # the programs are real ones: the engine saw several kinds of steps
    kinds = {feature[1] for feature in engine.features if feature[0] != "violation"}
    assert {"allocate", "free", "lookup"} <= kinds


def test_a_short_input_ends_the_program_early_without_a_verdict() -> None:
    harness = MachineHarness(machine_level(FAMILY, None), family=REF)
    result = harness.run(b"\x00")
    assert result.violation is None and result.stopped


def test_fuzz_run_drives_the_machine_of_a_family_it_does_not_know(
        tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), families.ENV_VAR: f"toy={REF}"}
    proc = subprocess.run(
        [sys.executable, "-m", "fuzz", "run", "--family", "toy", "--engine", "builtin",
         "--allocator", "tests.toy.mutants:evict_keeps_key", "--runs", "400",
         "--stop-on-failure", "--artifacts", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "machine route" in proc.stdout and "VIOLATION" in proc.stdout
    sidecars = list(tmp_path.glob("crash-toy-*.json"))
    assert len(sidecars) == 1
    record = json.loads(sidecars[0].read_text(encoding="utf-8"))
    assert record["route"] == "machine" and record["invariant"] == "CACHE"


MACHINE_MODULE = '''
from hypothesis.stateful import RuleBasedStateMachine, rule


class Counter(RuleBasedStateMachine):
    @rule()
    def step(self) -> None:
        pass


TestZippedCounter = Counter.TestCase
'''


def test_machines_are_found_as_submodules_when_no_source_is_on_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A zip on ``sys.path`` stands for the bundle: ``machines/`` is no folder there."""
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipfam/__init__.py", "")
        zipped.writestr("zipfam/machines/__init__.py", "")
        zipped.writestr("zipfam/machines/test_counter.py", MACHINE_MODULE)
        zipped.writestr("zipfam/machines/helpers.py", "")
    monkeypatch.syspath_prepend(str(archive))
    for name in [n for n in sys.modules if n.startswith("zipfam")]:
        monkeypatch.delitem(sys.modules, name)
    family: Any = SimpleNamespace(name="zipfam", machines=archive / "zipfam" / "machines")
    assert not family.machines.is_dir()
    levels = machine_levels(family)
    assert list(levels) == ["zipped_counter"]
    assert levels["zipped_counter"].machine.__module__ == "zipfam.machines.test_counter"
