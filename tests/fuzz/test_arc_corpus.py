"""The arc-cover corpora (``fuzz/families/v0/arc_corpus/<harness>/``,
``fuzz.families.v0.corpus_gen``): the tracer measures arcs, the greedy cover is deterministic, and
the shipped corpora reach arcs of the
bundled allocator and free-count boundaries the seed corpora do not."""

from __future__ import annotations

import random
import sys
import textwrap
from functools import partial
from pathlib import Path

import pytest

from fuzz.core.harness import Harness
from fuzz.families.v0 import corpus_gen
from fuzz.families.v0.decoder import Level
from fuzz.families.v0.tools import FUZZ_DIR
from properties.core.targets import Target
from properties.families.v0 import corpus_replay


def _paths(level: Level, corpus: str) -> list[Path]:
    paths = corpus_replay.seeds(level, corpus)
    assert paths is not None, f"no {corpus} for {level.value}"
    return paths


def test_traced_arcs_records_the_branch_taken(tmp_path: Path) -> None:
    source = tmp_path / "branchy.py"
    source.write_text(textwrap.dedent("""\
        def pick(flag):
            if flag:
                return 1
            return 2
        """), encoding="utf-8")
    namespace: dict[str, object] = {}
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)
    pick = namespace["pick"]
    assert callable(pick)
    value, arcs = corpus_gen.traced_arcs(partial(pick, True), root=str(tmp_path))
    other, other_arcs = corpus_gen.traced_arcs(partial(pick, False), root=str(tmp_path))
    assert (value, other) == (1, 2)
    name = str(source)
    assert {(name, -1, 2), (name, 2, 3), (name, 3, -1)} == arcs
    assert {(name, -1, 2), (name, 2, 4), (name, 4, -1)} == other_arcs


def test_traced_arcs_ignores_other_files_and_restores_the_tracer(tmp_path: Path) -> None:
    def tracer(frame: object, event: str, arg: object) -> None:
        return None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        _, arcs = corpus_gen.traced_arcs(partial(sorted, [3, 1, 2]), root=str(tmp_path))
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(previous)
    assert arcs == frozenset()


def test_arc_cover_is_deterministic(monkeypatch: pytest.MonkeyPatch, bundled: Target) -> None:
    monkeypatch.setattr(corpus_gen, "ARC_CANDIDATES", 12)
    harness = Harness(Level.HASHING).bind(bundled)
    runs = [corpus_gen.choose_arc_seeds(harness, random.Random("t/arcs"), [b""])
            for _ in range(2)]
    assert [d for d, _ in runs[0]] == [d for d, _ in runs[1]]
    assert runs[0], "twelve random inputs reach arcs the empty input does not"


@pytest.mark.parametrize("count", [0, 1, 13, 16, 127, 128, 300])
def test_hashing_takes_the_same_arcs_every_time(count: int) -> None:
    """No lazily filled cache in the hash: its first call for a token count takes the same
    code path as later ones. (A packer cache filled on first use made the arc cover depend
    on which counts earlier tests had hashed: the determinism test above failed in CI.)"""
    from prefixcache.hashing import hash_block_tokens

    tokens = list(range(count))
    arcs = [corpus_gen.traced_arcs(lambda: hash_block_tokens(False, 7, tokens))[1]
            for _ in range(2)]
    assert arcs[0] == arcs[1]


@pytest.mark.parametrize("level", list(Level), ids=lambda lv: lv.value)
def test_arc_corpus_adds_arcs_to_the_seed_corpus(level: Level, bundled: Target) -> None:
    """Every shipped corpus is within its replay cap, and each of its inputs was chosen for
    what the seed corpus and the inputs before it lack: arcs of the bundled allocator or
    free-count boundary keys."""
    harness = Harness(level).bind(bundled)
    arc_paths = _paths(level, corpus_gen.ARC_CORPUS)
    assert 1 <= len(arc_paths) <= corpus_gen.MAX_ARC_SEEDS
    assert all(p.parent == FUZZ_DIR / corpus_gen.ARC_CORPUS / level.value for p in arc_paths)

    def reach(paths: list[Path]) -> tuple[set[corpus_gen.Arc], set[corpus_gen.PressureKey]]:
        arcs: set[corpus_gen.Arc] = set()
        keys: set[corpus_gen.PressureKey] = set()
        for path in paths:
            result, reached = corpus_gen.traced_arcs(partial(harness.run, path.read_bytes()))
            assert result.violation is None and result.stopped is None, path.name
            arcs |= reached
            keys |= corpus_gen.pressure_keys(harness, result)
        return arcs, keys

    seed_arcs, seed_keys = reach(_paths(level, "corpus"))
    arc_arcs, arc_keys = reach(arc_paths)
    assert arc_arcs - seed_arcs or arc_keys - seed_keys
    assert len(arc_keys - seed_keys) + len(arc_arcs - seed_arcs) >= len(arc_paths)


def test_pressure_keys_show_each_step_per_device(bundled: Target) -> None:
    harness = Harness(Level.BLOCK).bind(bundled)
    result = max((harness.run(p.read_bytes()) for p in _paths(Level.BLOCK, "corpus")),
                 key=lambda r: len(r.program))
    keys = corpus_gen.pressure_keys(harness, result)
    assert {k[0] for k in keys} == {op.kind for op in result.program}
    devices = {k[2] for k in keys}
    assert "gpu" in devices
    for _kind, _err, _dev, had, took, none_left, cows in keys:
        assert isinstance(had, int) and 0 <= had <= 3
        assert isinstance(took, int) and -1 <= took <= 3
        assert isinstance(none_left, bool)
        assert cows in (0, 1, 2)
