"""The fuzzers' seed corpora as a fixed regression set for any target.

The seeds reach every operation kind the decoder can produce (``tests/fuzz`` checks that the
corpus covers the vocabulary), whatever examples Hypothesis happens to draw, and decoding
adapts to the target's capabilities, so each target gets the programs its API allows. Every
step is judged by the model and the shadow memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from fuzz.cli import corpus_dir
from fuzz.decoder import Level
from fuzz.harness import Harness
from fuzz.listing import format_program
from models.families import Violation
from models.operations import Op
from properties.targets import Target


def seeds(level: Level) -> list[Path] | None:
    """The seed inputs of ``level``'s harness, or None without a corpus (the corpora ship with
    the source tree, not in a wheel)."""
    directory = corpus_dir(level.value)
    return sorted(directory.iterdir()) if directory.is_dir() else None


def replay(level: Level, target: Target, paths: Sequence[Path],
           absorb: Callable[[Violation, list[Op]], bool] = lambda v, h: False
           ) -> list[Violation]:
    """The violations of ``target`` on the seeds, each noted with its seed and program and
    carrying its history (``prefixcache_history``); ``absorb(violation, history)`` drops the
    expected ones."""
    harness = Harness(level).bind(target)
    found: list[Violation] = []
    for path in paths:
        result = harness.run(path.read_bytes())
        violation = result.violation
        if violation is None:
            continue
        history: list[Op] = list(result.program)
        if absorb(violation, history):
            continue
        violation.prefixcache_history = history  # type: ignore[attr-defined]
        violation.add_note(f"seed {level.value}/{path.name}:\n"
                           + format_program(result.config, result.program, result.outcomes))
        found.append(violation)
    return found
