"""The fuzzers' seed corpora and the arc-cover corpora replayed against the selected target
(``properties.corpus_replay``).
A violation matching an expected-failure entry (``--xfails-file``) is absorbed, as in the
machines; any other fails the test with the seed and the program that shows it."""

from __future__ import annotations

import pytest

from fuzz.decoder import Level
from models.families import Violation
from models.operations import Op
from properties import corpus_replay, plugin
from properties.selection import current_target


@pytest.mark.parametrize("corpus", corpus_replay.CORPORA)
@pytest.mark.parametrize("level", list(Level), ids=lambda lv: lv.value)
def test_seed_corpus(level: Level, corpus: str, request: pytest.FixtureRequest) -> None:
    paths = corpus_replay.seeds(level, corpus)
    if paths is None:
        pytest.skip(f"no {corpus} for {level.value} (install from the source tree)")
    entries = plugin.expected_entries(request.config)

    def absorb(violation: Violation, history: list[Op]) -> bool:
        entry = next((e for e in entries if e.matches(violation, history)), None)
        if entry is not None:
            plugin.record(entry, violation)
        return entry is not None

    unexpected = corpus_replay.replay(level, current_target(), paths, absorb)
    if len(unexpected) == 1:
        raise unexpected[0]
    if unexpected:
        raise ExceptionGroup(f"{len(unexpected)} of {len(paths)} seeds fail", unexpected)
