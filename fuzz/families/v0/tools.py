"""The v0 family's fuzz tools (:mod:`fuzz.core.tools`), delegating to this folder's modules:
trace replay and recording (:mod:`.trace`, :mod:`.workloads`), seed corpus regeneration
(:mod:`.corpus_gen`) and the zoo (every mutant of ``tests.zoo.v0.broken.ZOO``, imported by
name when the zoo is asked for: the fuzzers import no test module).

The family object (``properties.families.v0.family``) takes the roles by calling these.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from fuzz.core.tools import TraceReplay, ZooMutant, zoo_mutant
from properties.core.targets import Target

#: The v0 family's harness folder: seed corpora, dictionaries, traces.
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


def regenerate_corpus(out: Path, *, seed: int) -> None:
    """:func:`fuzz.families.v0.corpus_gen.regenerate` into ``out``."""
    from fuzz.families.v0 import corpus_gen

    corpus_gen.regenerate(out, seed=seed)


def zoo() -> dict[str, ZooMutant]:
    """``tests.zoo.v0.broken.ZOO`` as zoo mutants (the spec ``tests.zoo.v0.broken:<name>``)."""
    module = importlib.import_module(ZOO_MODULE)
    return {name: zoo_mutant(f"{ZOO_MODULE}:{name}", mutant.families)
            for name, mutant in module.ZOO.items()}
