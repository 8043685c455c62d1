"""The seed-corpus replay (``properties.families.v0.corpus_replay``) judges every seed: silent on
the
bundled allocator, and it reports broken allocators with the seed and program that show it."""

from __future__ import annotations

import pytest

from fuzz.families.v0.decoder import Level
from models.core.invariants import Invariant, Violation
from models.families.v0.invariants import Family
from models.families.v0.operations import Op
from properties.core.targets import load_target
from properties.families.v0 import corpus_replay


def _replay_all(spec: str) -> list[Violation]:
    target = load_target(spec)
    found: list[Violation] = []
    for level in Level:
        paths = corpus_replay.seeds(level)
        assert paths, f"no seed corpus for {level.value}"
        found += corpus_replay.replay(level, target, paths)
    return found


def test_the_bundled_allocator_passes_every_seed() -> None:
    assert _replay_all("prefixcache:CpuGpuBlockAllocator.create") == []


@pytest.mark.parametrize(("mutant", "family"), [
    ("cow_not_recorded", Family.COW),
    ("swap_mapping_reversed", Family.SWAP),
    ("evictor_remove_keeps_count", Family.LEAK),
    ("no_free_blocks_not_value_error", Family.CRASH),
])
def test_broken_allocators_fail_seeds_with_a_program(mutant: str, family: Invariant) -> None:
    found = _replay_all(f"tests.zoo.v0.broken:{mutant}")
    assert found, f"{mutant} passes every seed"
    assert family in {v.family for v in found}
    first = found[0]
    history = first.prefixcache_history  # type: ignore[attr-defined]
    assert history and all(isinstance(op, Op) for op in history)
    assert any(note.startswith("seed ") for note in first.__notes__)
    # The first one is shrunk (none of these seeds is minimal): header, pool shape, a line
    # per step.
    shrunk = [note for note in first.__notes__ if note.startswith("shrunk to ")]
    assert len(shrunk) == 1
    steps = int(shrunk[0].split()[2])
    assert 0 < steps < len(history)
    assert len(shrunk[0].splitlines()) == steps + 2


def test_absorbed_violations_are_not_reported() -> None:
    target = load_target("tests.zoo.v0.broken:cow_not_recorded")
    level = Level.BLOCK
    paths = corpus_replay.seeds(level)
    assert paths
    seen: list[Violation] = []

    def absorb(violation: Violation, history: list[Op]) -> bool:
        seen.append(violation)
        return True

    assert corpus_replay.replay(level, target, paths, absorb) == []
    assert seen
