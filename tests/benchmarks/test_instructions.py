"""``benchmarks.instructions``: the instruction count is read from callgrind's report and the
imports' share is taken off per step; with valgrind present, a counted process really is
counted (a longer program executes more instructions)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from benchmarks.instructions import (
    InstructionCountError,
    _counted,
    collected,
    per_step,
)

ROOT = Path(__file__).resolve().parents[2]

CALLGRIND_TAIL = """==123== Events    : Ir
==123== Collected : 4930484524
==123==
==123== I   refs:      4,930,484,524
"""


def test_collected_reads_the_final_count() -> None:
    assert collected(CALLGRIND_TAIL) == 4_930_484_524
    assert collected("==1== Collected : 5\n" + CALLGRIND_TAIL) == 4_930_484_524


def test_no_count_is_an_error() -> None:
    with pytest.raises(InstructionCountError, match="no instruction count"):
        collected("==123== some other valgrind output\n")


def test_per_step_takes_the_imports_off() -> None:
    assert per_step(5_000, 2_000, 1_000) == 3.0
    with pytest.raises(InstructionCountError, match="no steps"):
        per_step(5_000, 2_000, 0)


@pytest.mark.skipif(shutil.which("valgrind") is None,
                    reason="valgrind is not installed (the tool needs it; CI machines lack it)")
def test_a_longer_program_counts_more_instructions() -> None:
    short, _ = _counted(ROOT, "pass", sys.executable)
    long, out = _counted(ROOT, "print(sum(range(200_000)))", sys.executable)
    assert out.strip() == str(sum(range(200_000)))
    assert long > short > 0
