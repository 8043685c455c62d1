"""Machine steps counted in CPU instructions: a speed comparison of two revisions that the
machine's speed swings do not move.

On the 2-core machines this suite is measured on, the same code's CPU time per state-machine
step varies by up to 2x between minutes, so time-based A/B runs of a 5% change need many
alternating rounds and still mislead. The number of instructions the process executes does
not vary: ``valgrind --tool=callgrind`` counts them (about 50x slower than a plain run). For
each revision (the working tree and ``--against REV``, checked out into a temporary git
worktree) this runs the suite benchmark's seeded machine run (``benchmarks.suite_speed``, the
same derandomized examples) and, apart, only its imports, and reports

    (instructions of the run - instructions of the imports) / steps

Both revisions run at once (instruction counts do not depend on the other core's load).
Instructions are not time: work that misses the caches (the cyclic collector walking a large
heap, pointer-chasing lookups) costs more time per instruction than the interpreter's own
dispatch, so a change that cuts memory traffic gains more time than instructions. Use it to
compare revisions, next to the time-based runs of ``python -m benchmarks --sections suite``.

    python -m benchmarks.instructions --against HEAD~3 --machines block --examples 10

Two revisions and one machine take about 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["Count", "collected", "count_revision", "counted_pair", "main", "per_step"]

ROOT = Path(__file__).resolve().parents[1]

#: What the counted process runs: the benchmark's machine run (``run`` true) or only the
#: imports it needs. Older revisions kept the target loader in ``properties.targets``.
_SCRIPT = """
try:
    from properties.core.targets import DEFAULT_SPEC, load_target
except ImportError:
    from properties.targets import DEFAULT_SPEC, load_target
from benchmarks import suite_speed
target = load_target(DEFAULT_SPEC)
if {run}:
    result = suite_speed.run_machine({machine!r}, target, {examples}, {steps}, repeats=0)
    print("steps", result.steps)
"""

_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
_STEPS = re.compile(r"^steps (\d+)$", re.MULTILINE)


class InstructionCountError(RuntimeError):
    """A counted run failed, or printed no instruction count."""


@dataclass(frozen=True, slots=True)
class Count:
    """One revision's machine run: steps, and instructions of the run and of its imports."""

    revision: str
    machine: str
    steps: int
    run: int
    imports: int

    @property
    def per_step(self) -> float:
        return per_step(self.run, self.imports, self.steps)


def per_step(run: int, imports: int, steps: int) -> float:
    """Instructions per step of a run, its imports' instructions taken off."""
    if steps <= 0:
        raise InstructionCountError("the run made no steps")
    return (run - imports) / steps


def collected(stderr: str) -> int:
    """The total instruction count callgrind prints when the process ends."""
    found = _COLLECTED.findall(stderr)
    if not found:
        raise InstructionCountError("callgrind printed no instruction count:\n"
                                    + stderr[-2000:])
    return int(found[-1])


@cache
def _site_packages(python: str) -> tuple[str, ...]:
    """The interpreter's installed-package directories (asked once per interpreter)."""
    libs = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path("
                           "'purelib')); print(sysconfig.get_path('platlib'))"],
                          check=True, capture_output=True, text=True).stdout.split()
    return tuple(dict.fromkeys(libs))


def _environment(tree: Path, python: str) -> dict[str, str]:
    """``tree``'s packages, then the interpreter's installed ones (``python -S``, below, skips
    the ``.pth`` files: an editable install of this project would otherwise supply the
    modules an older revision lacks from the working tree)."""
    path = os.pathsep.join([str(tree), *_site_packages(python)])
    return {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": path}


def _run(command: list[str], tree: Path, python: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(command, cwd=tree, env=_environment(tree, python),
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise InstructionCountError(f"a run in {tree} failed (exit {proc.returncode}):\n"
                                    f"{proc.stderr[-2000:]}")
    return proc


def _counted(tree: Path, script: str, python: str) -> tuple[int, str]:
    """Instructions of ``python -S -c script`` in ``tree`` (see :func:`_environment`)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = _run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/callgrind.out",
                     python, "-S", "-c", script], tree, python)
    return collected(proc.stderr), proc.stdout


def counted_pair(tree: Path, run: str, baseline: str,
                 python: str = sys.executable) -> tuple[int, str, int]:
    """Instructions of script ``run`` (and its output) and of script ``baseline`` in ``tree``,
    counted side by side. ``run``, uncounted, comes first (seconds): a fresh checkout would
    otherwise pay inside the counted run for what a first run writes (byte code, Hypothesis's
    character map in ``.hypothesis/``)."""
    _run([python, "-S", "-c", run], tree, python)
    with ThreadPoolExecutor(2) as pool:
        counted = pool.submit(_counted, tree, run, python)
        base = pool.submit(_counted, tree, baseline, python)
        (run_count, out), (base_count, _) = counted.result(), base.result()
    return run_count, out, base_count


def count_revision(tree: Path, revision: str, machine: str, examples: int, steps: int,
                   python: str = sys.executable) -> Count:
    """The machine run and its imports counted in ``tree`` (one checkout of ``revision``)."""
    fields = {"machine": machine, "examples": examples, "steps": steps}
    run_count, out, import_count = counted_pair(
        tree, _SCRIPT.format(run=True, **fields), _SCRIPT.format(run=False, **fields), python)
    made = _STEPS.search(out)
    if made is None:
        raise InstructionCountError(f"the run in {tree} printed no step count:\n{out[-500:]}")
    return Count(revision, machine, int(made.group(1)), run_count, import_count)


def _worktree(revision: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force",
                    str(where), revision], check=True, capture_output=True, text=True)
    return where


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", default="HEAD",
                        help="the revision to compare the working tree with (default HEAD)")
    parser.add_argument("--machines", nargs="+", default=["block"],
                        choices=["block", "sequence"])
    parser.add_argument("--examples", type=int, default=10,
                        help="derandomized examples per machine run (default 10: ~1,200 "
                             "block steps, about 75 s under callgrind)")
    parser.add_argument("--steps", type=int, default=50, help="steps per example")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind not found: instruction counts need it (Debian: apt install valgrind)",
              file=sys.stderr)
        return 2
    print(f"instructions per machine step (callgrind; {args.examples} derandomized examples "
          f"x up to {args.steps} steps, PYTHONHASHSEED=0): working tree against "
          f"{args.against}")
    with tempfile.TemporaryDirectory() as tmp:
        base = _worktree(args.against, Path(tmp) / "against")
        try:
            for machine in args.machines:
                with ThreadPoolExecutor(2) as pool:
                    theirs = pool.submit(count_revision, base, args.against, machine,
                                         args.examples, args.steps)
                    ours = pool.submit(count_revision, ROOT, "working tree", machine,
                                       args.examples, args.steps)
                    counts = (theirs.result(), ours.result())
                for c in counts:
                    print(f"  {machine:9s} {c.revision:14s} {c.steps:6,} steps  "
                          f"{c.per_step / 1e6:7.3f} M instructions/step")
                print(f"  {machine:9s} {args.against} / working tree: "
                      f"{counts[0].per_step / counts[1].per_step:.3f}x")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(base)], check=False, capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
