"""The serving trace counted in CPU instructions per target: the whole-trace ratio
(upstream over ours) in a measure that the machine's speed swings do not move.

On the 2-core machines this suite is measured on, the same trace's time swings by up to 1.7x
between runs seconds apart, and a time ratio moves with whichever target a slow spell hit.
Here each target's compiled trace (exactly the calls ``python -m benchmarks --sections ops``
times, from :mod:`benchmarks.trace_speed`) is marshalled once, then executed on a fresh
allocator under ``valgrind --tool=callgrind``; a second counted process does everything but
the execution, and the difference is the trace's own instructions. Instructions are not time
(cache misses cost more time per instruction), so this complements the time-based table; it
does not replace it.

    python -m benchmarks.trace_instructions [--scales small large] [--targets ours vllm aphrodite]

About 40 s per target and scale on 2 cores.
"""

from __future__ import annotations

import argparse
import marshal
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import serving_trace, trace_speed
from benchmarks.instructions import ROOT, counted_pair
from benchmarks.run import APHRODITE_SPEC, DEFAULT, VLLM_SPEC
from benchmarks.serving_trace import Trace
from properties.core.targets import DEFAULT_SPEC, load_target

__all__ = [
    "SCALES", "TARGETS", "TraceCount", "count_trace", "counted_script", "main", "save_program",
    "scale_trace",
]

#: Target label -> load spec (the ``ops`` section's columns).
TARGETS = {"ours": DEFAULT_SPEC, "vllm": VLLM_SPEC, "aphrodite": APHRODITE_SPEC}

#: Scale -> the ``ops`` section's trace configuration of that name (``benchmarks.run.DEFAULT``).
SCALES = {"small": "ops_small", "large": "ops_large"}

#: The counted process: the target's allocator built as the compiled program builds it, the
#: marshalled chunks loaded, and (``run`` true) executed in order.
_SCRIPT = """
import marshal
from benchmarks.compiled import clean_heap
from benchmarks.run import DEFAULT
from benchmarks.trace_speed import config_for
from properties.core.targets import load_target
target = load_target({spec!r})
env = target.adapter(config_for(getattr(DEFAULT, {scale!r}), target)).env()
with open({path!r}, "rb") as f:
    codes = marshal.load(f)
clean_heap()
if {run}:
    for code in codes:
        exec(code, env)
    print("ran", len(codes))
"""


@dataclass(frozen=True, slots=True)
class TraceCount:
    """One target's trace: instructions with and without its execution."""

    label: str
    scale: str
    operations: int
    run: int
    setup: int

    @property
    def trace(self) -> int:
        return self.run - self.setup


def scale_trace(scale: str) -> Trace:
    """The ``ops`` section's trace at ``scale``."""
    return serving_trace.generate(getattr(DEFAULT, SCALES[scale]))


def save_program(trace: Trace, label: str, path: Path) -> int:
    """Compile ``trace`` for ``label``'s target and marshal its plain chunks to ``path``; the
    number of operations."""
    program = trace_speed.compile_all(trace, {label: load_target(TARGETS[label])})[label]
    path.write_bytes(marshal.dumps(program.plain))
    return len(program.kinds)


def counted_script(label: str, scale: str, path: Path, run: bool) -> str:
    return _SCRIPT.format(spec=TARGETS[label], scale=SCALES[scale], path=str(path), run=run)


def count_trace(label: str, scale: str, trace: Trace, tmp: Path,
                python: str = sys.executable) -> TraceCount:
    """``label``'s run of ``trace`` (the one at ``scale``) counted: the run, and the setup
    alone (:func:`benchmarks.instructions.counted_pair`)."""
    path = tmp / f"{label}-{scale}.marshal"
    operations = save_program(trace, label, path)
    run_count, out, setup_count = counted_pair(
        ROOT, counted_script(label, scale, path, True), counted_script(label, scale, path, False),
        python)
    if not out.startswith("ran "):
        raise RuntimeError(f"the counted run of {label} printed {out[-300:]!r}")
    return TraceCount(label, scale, operations, run_count, setup_count)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scales", nargs="+", default=["small"], choices=list(SCALES))
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind not found: instruction counts need it (Debian: apt install valgrind)",
              file=sys.stderr)
        return 2
    labels = ["ours", *(t for t in args.targets if t != "ours")]
    print("serving trace in CPU instructions (callgrind; the ops section's trace without "
          "LoRA keys, PYTHONHASHSEED=0); ratio = target / ours")
    with tempfile.TemporaryDirectory() as tmp:
        for scale in args.scales:
            trace = scale_trace(scale)
            counts: dict[str, TraceCount] = {}
            for label in labels:
                try:
                    counts[label] = count_trace(label, scale, trace, Path(tmp))
                except Exception as exc:  # an upstream target missing: say so, go on
                    if label == "ours":
                        raise
                    print(f"  {scale:5s} {label:10s} skipped: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}")
                    continue
                c = counts[label]
                ratio = c.trace / counts["ours"].trace
                print(f"  {scale:5s} {label:10s} {c.operations:8,} ops  "
                      f"{c.trace / 1e6:9.1f} M instructions  "
                      f"{c.trace / c.operations:8.0f} per op  {ratio:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
