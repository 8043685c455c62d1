"""The v0 family's fuzz tools (:mod:`fuzz.core.tools`), delegating to this folder's modules:
trace replay and recording (:mod:`.trace`, :mod:`.workloads`) and the zoo (every mutant of
``tests.zoo.v0.broken.ZOO``, imported by name when the zoo is asked for: the fuzzers import no
test module).

The family object (``properties.families.v0.family``) takes the roles by calling these.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from fuzz.core.tools import TraceReplay, ZooMutant, zoo_mutant
from properties.core.targets import Target

#: The v0 family's harness folder: its OSS-Fuzz harness files, traces.
FUZZ_DIR = Path(__file__).resolve().parent
#: The shipped traces.
TRACES_DIR = FUZZ_DIR / "traces"
#: The zoo's registry module (``ZOO``: name -> mutant with ``families``).
ZOO_MODULE = "tests.zoo.v0.broken"


def replay_trace(path: Path, target: Target) -> TraceReplay:
    """The trace at ``path`` judged against ``target``; ``ValueError`` if it is no trace."""
    from fuzz.families.v0.trace import TraceError, read_trace, replay

    try:
        trace = read_trace(path)
    except (TraceError, ValueError) as why:
        raise ValueError(str(why)) from why
    result = replay(trace, target)
    problems = tuple(str(p) for p in (result.violation, result.divergence,
                                      result.out_of_contract) if p is not None)
    return TraceReplay(result.ok, result.steps, len(trace.entries), problems)


def record_traces(out: Path) -> list[tuple[Path, int]]:
    """Every workload of :data:`fuzz.families.v0.workloads.WORKLOADS` recorded against the
    bundled allocator into ``out/<name>.jsonl``."""
    from fuzz.families.v0.trace import write_trace
    from fuzz.families.v0.workloads import WORKLOADS, record

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for workload in WORKLOADS:
        recorder = record(workload)
        path = out / f"{workload.name}.jsonl"
        write_trace(path, recorder)
        written.append((path, len(recorder.entries)))
    return written


#: The zoo's checks (``Mutant.checks``) that are machines, by the machine's level; the one-shot
#: checks (a long-chain program, the direct hash-quality check) have none.
CHECK_LEVELS = {"block": "block_level", "sequence": "sequence_level",
                "evictor": "evictor_level", "refcount": "refcount_level"}


def zoo() -> dict[str, ZooMutant]:
    """``tests.zoo.v0.broken.ZOO`` as zoo mutants (the spec ``tests.zoo.v0.broken:<name>``),
    each with the machine levels of its checks, in the zoo's order."""
    module = importlib.import_module(ZOO_MODULE)
    return {name: zoo_mutant(f"{ZOO_MODULE}:{name}", mutant.families,
                             levels=[CHECK_LEVELS[c] for c in mutant.checks if c in CHECK_LEVELS])
            for name, mutant in module.ZOO.items()}
