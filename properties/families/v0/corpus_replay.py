"""The fuzzers' seed corpora, and the arc-cover corpora, as a fixed regression set for any
target.

The seeds reach every operation kind the decoder can produce (``tests/fuzz`` checks that the
corpus covers the vocabulary), and the arc corpora every arc of the bundled allocator the
decoder reached when they were chosen, and steps at the free-count boundary
(``fuzz.families.v0.corpus_gen``), whatever examples Hypothesis happens to draw. Decoding adapts to
the target's capabilities, so each target gets the programs its API allows. Every step is judged by
the model and the shadow memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from fuzz.core.harness import Harness
from fuzz.families.v0.corpus_gen import ARC_CORPUS
from fuzz.families.v0.decoder import Level
from fuzz.families.v0.listing import format_program
from fuzz.families.v0.tools import FUZZ_DIR
from models.core.invariants import Violation
from models.families.v0.capabilities import Config
from models.families.v0.operations import Op
from properties.core import baseline
from properties.core.shrink import executed
from properties.core.signature import Signature, signature
from properties.core.targets import Target
from properties.core.watchdog import Hang

#: The corpora replayed, as directories under ``fuzz/``: the fuzzers' seeds, the arc cover.
CORPORA: tuple[str, ...] = ("corpus", ARC_CORPUS)


def seeds(level: Level, corpus: str = "corpus") -> list[Path] | None:
    """The inputs of ``level``'s harness in ``corpus`` (one of ``CORPORA``), or None without
    that corpus (the corpora ship with the source tree, not in a wheel)."""
    directory = FUZZ_DIR / corpus / level.value
    return sorted(directory.iterdir()) if directory.is_dir() else None


def replay(level: Level, target: Target, paths: Sequence[Path],
           absorb: Callable[[Violation, list[Op]], bool] = lambda v, h: False,
           replayed: Callable[[int], None] = lambda n: None) -> list[Violation]:
    """The violations of ``target`` on the seeds, each noted with its seed and program and
    carrying its history (``prefixcache_history``); ``absorb(violation, history)`` drops the
    expected ones (it may read the seed's pool from ``violation.prefixcache_config``). The
    first one of each signature (:mod:`properties.core.signature`) is also shrunk (keeping the
    signature): the shorter program is added to its notes and attached as its replayable
    program (``properties.core.baseline``).

    The replay stops at the first seed the target hung on (:class:`Hang`): the rest could each
    wait out the step limit again (a target that deadlocks would cost the whole corpus times
    the limit); the hang's notes say how many seeds were left, and ``replayed(n)`` is told how
    many were run."""
    harness = Harness(level).bind(target)
    found: list[Violation] = []
    seen: set[Signature] = set()
    for done, path in enumerate(paths, 1):
        result = harness.run(path.read_bytes())
        violation = result.violation
        if violation is None:
            continue
        history: list[Op] = list(result.program)
        violation.prefixcache_config = result.config  # type: ignore[attr-defined]
        hung = isinstance(violation, Hang) and done < len(paths)
        if hung:
            violation.add_note(f"the target hung: the other {len(paths) - done} seeds of this "
                               f"corpus were not replayed")
        if not absorb(violation, history):
            violation.prefixcache_history = history  # type: ignore[attr-defined]
            violation.add_note(f"seed {level.value}/{path.name}:\n"
                               + format_program(result.config, result.program, result.outcomes))
            sig = signature(violation, target.allocator_type)
            if sig not in seen:
                seen.add(sig)
                shrink_and_attach(target, result.config, history, violation)
            found.append(violation)
        if hung:
            replayed(done)
            return found
    replayed(len(paths))
    return found


def shrink_and_attach(target: Target, config: Config, history: list[Op],
                      violation: Violation) -> None:
    """Shrink ``violation``'s program (keeping its signature), note the shorter one and attach
    it as its replayable program."""
    small = baseline.shrink_and_attach(target, config, executed(target, config, history),
                                       violation)
    if small is not None:
        config, log = small
        plural = "" if len(log) == 1 else "s"
        violation.add_note(f"shrunk to {len(log)} step{plural}:\n" + format_program(
            config, [s.op for s in log], [s.outcome for s in log]))


def group(violations: Sequence[Violation], allocator_type: str
          ) -> list[tuple[Violation, int]]:
    """One violation per signature (the first, which carries the shrunk program), with how
    many seeds showed it."""
    firsts: dict[Signature, tuple[Violation, int]] = {}
    for violation in violations:
        sig = signature(violation, allocator_type)
        first, n = firsts.get(sig, (violation, 0))
        firsts[sig] = (first, n + 1)
    return list(firsts.values())
