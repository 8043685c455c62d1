"""The fuzzers' seed corpora and the arc-cover corpora replayed against the selected target
(``properties.families.v0.corpus_replay``).
A violation matching an expected-failure entry (``--xfails-file``) is absorbed, as in the
machines; the others are grouped by signature (``properties.core.signature``): each distinct one
fails the test once, with how many seeds showed it, its first seed and its shrunk program.
Under ``--all`` they are handed to the plugin instead (each new one shrunk), which reports them
the same way."""

from __future__ import annotations

import functools

import pytest

from fuzz.families.v0.decoder import Level
from models.core.invariants import Violation
from models.families.v0.operations import Op
from properties.core import plugin
from properties.core.baseline import Resolver
from properties.core.selection import current_target
from properties.families.v0 import corpus_replay


@pytest.mark.parametrize("corpus", corpus_replay.CORPORA)
@pytest.mark.parametrize("level", list(Level), ids=lambda lv: lv.value)
def test_seed_corpus(level: Level, corpus: str, request: pytest.FixtureRequest) -> None:
    paths = corpus_replay.seeds(level, corpus)
    if paths is None:
        pytest.skip(f"no {corpus} for {level.value} (install from the source tree)")
    entries = plugin.expected_entries(request.config)
    target = current_target()
    plugin.PROGRESS.examples = len(paths)

    def absorb(violation: Violation, history: list[Op]) -> bool:
        config = violation.prefixcache_config  # type: ignore[attr-defined]
        mechanism = Resolver(target, config, history, violation)
        kind = target.allocator_type
        entry = next((e for e in entries if e.matches(violation, history, kind, mechanism)),
                     None)
        if entry is not None:
            plugin.record(entry, violation, mechanism.absorbed(entry.id, entry.keep(kind)))
            return True
        plugin.note_worse(entries, violation, history, kind, mechanism)
        if not explore:
            return False
        plugin.absorb_new(violation, kind, history, shrink=functools.partial(
            corpus_replay.shrink_and_attach, target, config, history, violation),
            mechanism=mechanism)
        return True

    explore = plugin.exploring(request.config)
    unexpected = corpus_replay.replay(level, target, paths, absorb,
                                      lambda n: setattr(plugin.PROGRESS, "examples", n))
    distinct = corpus_replay.group(unexpected, target.allocator_type)
    for violation, seeds in distinct:
        violation.add_note(f"{seeds} of {len(paths)} seeds show this deviation")
    if len(distinct) == 1:
        raise distinct[0][0]
    if distinct:
        raise ExceptionGroup(f"{len(distinct)} distinct deviations on {len(unexpected)} of "
                             f"{len(paths)} seeds", [v for v, _ in distinct])
