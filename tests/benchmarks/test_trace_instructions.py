"""``benchmarks.trace_instructions``: the marshalled program is the compiled trace, and the
script the counted processes run executes it (the run) or stops short of it (the setup)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import trace_instructions as ti
from benchmarks.instructions import _environment
from benchmarks.run import QUICK

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def quick_scales(monkeypatch: pytest.MonkeyPatch) -> None:
    """The quick mode's (small) traces under the ``ops`` names, here and in the script."""
    monkeypatch.setattr(ti, "DEFAULT", QUICK)
    script = ti._SCRIPT.replace("import DEFAULT", "import QUICK as DEFAULT")
    monkeypatch.setattr(ti, "_SCRIPT", script)


@pytest.mark.usefixtures("quick_scales")
@pytest.mark.parametrize("run", [True, False])
def test_counted_script_runs_the_trace_or_only_its_setup(tmp_path: Path, run: bool) -> None:
    path = tmp_path / "ours.marshal"
    operations = ti.save_program(ti.scale_trace("small"), "ours", path)
    assert operations > 1_000
    script = ti.counted_script("ours", "small", path, run)
    probe = script + "\nprint('free', env['alloc'].get_num_free_blocks(env['Device'].GPU))\n"
    out = subprocess.run([sys.executable, "-S", "-c", probe], cwd=ROOT, check=True,
                         capture_output=True, text=True,
                         env=_environment(ROOT, sys.executable)).stdout
    free = int(out.rsplit("free ", 1)[1])
    total = QUICK.ops_small.num_gpu_blocks
    if run:
        assert out.startswith("ran ")
        assert free < total  # the trace ends with sequences still running
    else:
        assert "ran" not in out and free == total


def test_trace_count_subtracts_the_setup() -> None:
    count = ti.TraceCount("ours", "small", 10, run=1_500, setup=500)
    assert count.trace == 1_000
