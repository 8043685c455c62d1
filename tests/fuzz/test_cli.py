"""``python -m fuzz run`` with the built-in engine: progress lines, a clean run against the
bundled allocator, and a crash file plus the printed program and violation for a mutant;
the harness modules import and run without atheris."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.cli import REPO_DIR, main
from fuzz.core.instrumentation import atheris_module, instrumented
from tests.fuzz.conftest import MUTANT_SPEC


def test_run_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "sequence_level", "--engine", "builtin", "--runs", "60", "--time", "0",
                 "--seed", "4", "--corpus", str(tmp_path / "corpus"), "--artifacts",
                 str(tmp_path / "artifacts"), "--report-every", "0"])
    out = capsys.readouterr().out
    assert code == 0
    assert "exec/s=" in out and "corpus=" in out and "failures=0" in out
    assert "60 executions" in out
    assert any((tmp_path / "corpus").iterdir())
    assert not (tmp_path / "artifacts").exists()


def test_run_finds_a_mutant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "block_level", "--engine", "builtin", "--allocator", MUTANT_SPEC,
                 "--runs", "500", "--time", "0", "--artifacts", str(tmp_path),
                 "--stop-on-failure"])
    out = capsys.readouterr().out
    assert code == 1
    assert "VIOLATION" in out and "[COW]" in out and "  0  " in out
    crashes = sorted(p for p in tmp_path.iterdir() if p.suffix != ".json")
    assert len(crashes) == 1
    record = json.loads(crashes[0].with_suffix(".json").read_text(encoding="utf-8"))
    assert record["family"] == "COW" and record["target"] == MUTANT_SPEC
    assert record["program"]


def test_same_seed_same_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "hashing", "--engine", "builtin", "--runs", "150", "--time", "0", "--seed",
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


@pytest.mark.skipif(atheris_module() is None, reason="atheris is not installed")
def test_atheris_entry_point(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO_DIR))
    v0 = REPO_DIR / "fuzz" / "families" / "v0"
    proc = subprocess.run([sys.executable, str(v0 / "fuzz_block_level.py"),
                           "-runs=30", "-seed=1", str(v0 / "corpus" / "block_level")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "INITED cov:" in proc.stderr and " runs in " in proc.stderr
