"""Every SGLang zoo mutant is caught by the sglang family's machine under the fixed schedule,
with the invariant it breaks and a short program; the bundled reference passes the whole
schedule (no false alarm); each mutant's patches still apply to the reference source."""

from __future__ import annotations

import pytest

from tests.zoo.sglang.harness import SCHEDULE, catch, caught, target_of
from tests.zoo.sglang.mutants import MUTANTS, module

#: Every shrunk program is at most this long.
MAX_SHRUNK = 16


def test_the_zoo_is_large_enough_and_its_patches_apply() -> None:
    assert len(MUTANTS) >= 25
    for name in MUTANTS:
        assert module(name) is not None  # PatchError names the patch that no longer applies
    assert {m.invariant for m in MUTANTS.values()} >= {
        "MATCH", "CONTENT", "CACHE", "NAMESPACE", "OWN", "LOCK", "SIZE", "EVICT"}


def test_the_bundled_reference_passes_the_schedule() -> None:
    target = target_of("prefixcache.sglang.srt.mem_cache.radix_cache:RadixCache")
    for budget in SCHEDULE:
        assert catch(target, budget) is None, budget


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_each_mutant_is_caught_with_its_invariant(name: str) -> None:
    got = caught(target_of(f"tests.zoo.sglang.mutants:{name}"))
    assert got is not None, f"{name} escaped the schedule"
    found, _ = got
    assert found.found.family.value in MUTANTS[name].caught_by, found.found
    assert found.violation.family == found.found.family, found.violation  # shrunk, same kind
    assert len(found.program) <= MAX_SHRUNK, found.program
