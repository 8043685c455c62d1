"""``python -m fuzz regress`` end to end: a crash found in a zoo mutant becomes a readable
program and a pytest regression test that fails against the mutant and passes against the
fixed (bundled) allocator; the same from a reproducer's program JSON and a raw crash input."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from fuzz.cli import main
from fuzz.core.engine import Engine
from fuzz.core.machine_harness import harness_for
from models.core.invariants import Violation
from properties.core import selection
from properties.core.targets import Target
from tests.fuzz.conftest import MUTANT_SPEC


def _crash(tmp_path: Path, mutant: Target) -> Path:
    harness = harness_for("block_level", family="v0").bind(mutant)
    engine = Engine(harness.run, harness.seeds(0), seed=0)
    stats = engine.fuzz(max_execs=400, stop_on_failure=True)
    assert stats.failures
    failure = stats.failures[0]
    return harness.write_crash(failure.data, failure.result, tmp_path / "artifacts")


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check_generated(path: Path, bundled: Target, mutant: Target) -> None:
    module = _load(path)
    test = getattr(module, path.stem)
    previous = selection._current, selection._choice
    try:
        selection.use(bundled)
        test()  # the fixed allocator passes
        selection.use(mutant)
        with pytest.raises(Violation):
            test()  # the bug is still caught
    finally:
        selection._current, selection._choice = previous


def test_regress_from_crash_file(tmp_path: Path, bundled: Target, mutant: Target,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    crash = _crash(tmp_path, mutant)
    out = tmp_path / "regressions"
    assert main(["regress", str(crash), "--name", "CoW not recorded!", "--allocator",
                 MUTANT_SPEC, "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "  0. " in printed and "[COW]" in printed
    path = out / "test_cow_not_recorded.py"
    source = path.read_text(encoding="utf-8")
    assert all(len(line) <= 100 for line in source.splitlines())
    assert "Program (one operation per line)" in source
    _check_generated(path, bundled, mutant)


def test_regress_from_raw_input_and_minimize(tmp_path: Path, bundled: Target,
                                            mutant: Target) -> None:
    crash = _crash(tmp_path, mutant)
    crash.with_suffix(".json").unlink()  # as libFuzzer leaves it: bytes only
    raw = crash.rename(tmp_path / "crash-block_level-raw")
    out = tmp_path / "regressions"
    assert main(["regress", str(raw), "--name", "raw", "--allocator", MUTANT_SPEC,
                 "--minimize", "--out-dir", str(out)]) == 0
    _check_generated(out / "test_raw.py", bundled, mutant)


def test_regress_from_program_json(tmp_path: Path, bundled: Target, mutant: Target) -> None:
    crash = _crash(tmp_path, mutant)
    record = json.loads(crash.with_suffix(".json").read_text(encoding="utf-8"))
    program = tmp_path / "program.json"
    program.write_text(json.dumps(record["program"]), encoding="utf-8")
    cfg = record["config"]
    out = tmp_path / "regressions"
    assert main(["regress", str(program), "--name", "from_json", "--allocator", MUTANT_SPEC,
                 *(arg for key, value in cfg.items() for arg in ("--config", f"{key}={value}")),
                 "--out-dir", str(out)]) == 0
    module = _load(out / "test_from_json.py")
    assert record["program"] == module.PROGRAM
    _check_generated(out / "test_from_json.py", bundled, mutant)
