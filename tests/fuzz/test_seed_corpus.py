"""Every harness runs its whole seed corpus, as plain tests (no atheris), against the selected
target; the corpora cover each harness's operation vocabulary."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fuzz.cli import corpus_dir, dict_path, read_dict
from fuzz.core.execution import decodable_kinds
from fuzz.core.harness import Harness
from fuzz.families.v0 import fuzz_block_level, fuzz_hashing, fuzz_sequence_level
from fuzz.families.v0.corpus_gen import RARE_KINDS
from fuzz.families.v0.decoder import Level
from properties.core.targets import Target

ENTRY_POINTS = {
    Level.BLOCK: fuzz_block_level.TestOneInput,
    Level.SEQUENCE: fuzz_sequence_level.TestOneInput,
    Level.HASHING: fuzz_hashing.TestOneInput,
}
SEEDS = [(level, path) for level in Level for path in sorted(corpus_dir(level.value).iterdir())]


@pytest.mark.parametrize(("level", "path"), SEEDS,
                         ids=[f"{lv.value}/{p.name}" for lv, p in SEEDS])
def test_seed_input_passes(level: Level, path: Path) -> None:
    ENTRY_POINTS[level](path.read_bytes())


@pytest.mark.parametrize("level", list(Level), ids=lambda lv: lv.value)
def test_corpus_covers_the_vocabulary(level: Level, bundled: Target) -> None:
    harness = Harness(level).bind(bundled)
    seeds = sorted(corpus_dir(level.value).iterdir())
    assert 20 <= len(seeds) <= 60
    kinds = {op.kind for p in seeds for op in harness.run(p.read_bytes()).program}
    assert decodable_kinds(bundled, level) - RARE_KINDS <= kinds


@pytest.mark.parametrize("level", list(Level), ids=lambda lv: lv.value)
def test_dictionary_parses(level: Level) -> None:
    words = read_dict(dict_path(level.value))
    assert len(words) >= 10
    assert all(2 <= len(w) <= 24 for w in words)


def test_block_corpus_shows_refusals(bundled: Target) -> None:
    """The seeds include steps the target must refuse: no free blocks, and typed misuse."""
    harness = Harness(Level.BLOCK).bind(bundled)
    errors = {o.error.value for p in sorted(corpus_dir(Level.BLOCK.value).iterdir())
              for o in harness.run(p.read_bytes()).outcomes if o.error is not None}
    assert {"no_free_blocks", "misuse"} <= errors


def test_block_corpus_has_a_chain_past_the_recursion_limit(bundled: Target) -> None:
    """The cover keeps a long-pool seed whose chain is deeper than CPython's recursion limit."""
    harness = Harness(Level.BLOCK).bind(bundled)
    longest = max(len(o.new_blocks) for p in sorted(corpus_dir(Level.BLOCK.value).iterdir())
                  for o in harness.run(p.read_bytes()).outcomes)
    assert longest > sys.getrecursionlimit()
