"""``python -m fuzz run`` with the built-in engine (v0 through its machines): progress lines, a
clean run against the bundled allocator, a crash file plus the printed program and violation
for a mutant, the same corpus from the same seed; instrumentation is optional (the harness
files under atheris: ``tests/fuzz/test_harness_files.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzz.cli import main
from fuzz.core.instrumentation import atheris_module, instrumented
from tests.fuzz.conftest import MUTANT_SPEC


def test_run_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "sequence_level", "--engine", "builtin", "--runs", "40", "--time", "0",
                 "--seed", "4", "--corpus", str(tmp_path / "corpus"), "--artifacts",
                 str(tmp_path / "artifacts"), "--report-every", "0"])
    out = capsys.readouterr().out
    assert code == 0
    assert "exec/s=" in out and "corpus=" in out and "failures=0" in out
    assert "40 executions" in out and "machine route" in out
    assert any((tmp_path / "corpus").iterdir())
    assert not (tmp_path / "artifacts").exists()


def test_run_finds_a_mutant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "block_level", "--engine", "builtin", "--allocator", MUTANT_SPEC,
                 "--runs", "500", "--time", "0", "--artifacts", str(tmp_path),
                 "--stop-on-failure"])
    out = capsys.readouterr().out
    assert code == 1
    assert "VIOLATION" in out and "[COW]" in out and "alloc = " in out  # the program's script
    crashes = sorted(p for p in tmp_path.iterdir() if p.suffix != ".json")
    assert len(crashes) == 1
    record = json.loads(crashes[0].with_suffix(".json").read_text(encoding="utf-8"))
    assert record["invariant"] == "COW" and record["family"] == "v0"
    assert record["target"] == MUTANT_SPEC and record["route"] == "machine"
    assert record["program"]


def test_same_seed_same_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "block_level", "--engine", "builtin", "--runs", "15", "--time", "0", "--seed",
            "9", "--report-every", "1000"]
    main([*args, "--corpus", str(tmp_path / "a")])
    main([*args, "--corpus", str(tmp_path / "b")])
    capsys.readouterr()
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == \
        sorted(p.name for p in (tmp_path / "b").iterdir())


def test_instrumentation_is_optional() -> None:
    with instrumented(False):
        pass
    if atheris_module() is None:
        with instrumented(True):
            pass
