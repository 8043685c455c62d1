"""Every FULL + SWA zoo mutant (patches of the bundled ``SWARadixCache`` and its allocator) is
caught by the SWA level's machine under the fixed schedule's first seed, with the invariant it
breaks and a short program; the bundled FULL + SWA reference passes that seed."""

from __future__ import annotations

import pytest

from fuzz.cli import main
from fuzz.families.sglang.zoo import zoo as fuzz_zoo
from properties.families.sglang.machines.test_sglang_swa import SWAMachine
from properties.families.sglang.targets import BUNDLED_SWA_SPEC
from tests.zoo.sglang.harness import SCHEDULE, catch, caught, target_of
from tests.zoo.sglang.mutants import REQUEST_MUTANTS, SWA_MUTANTS, module

MAX_SHRUNK = 16
#: One seed of the schedule: every SWA mutant falls to it, and the bundled reference's pass
#: over it is the expensive part (its sizes walk the tree).
SWA_SCHEDULE = SCHEDULE[:1]


def test_the_swa_zoo_patches_apply() -> None:
    assert len(SWA_MUTANTS) >= 5
    for name in SWA_MUTANTS:
        assert module(name) is not None


def test_the_bundled_swa_reference_passes_the_schedule() -> None:
    target = target_of(BUNDLED_SWA_SPEC)
    for budget in SWA_SCHEDULE:
        assert catch(target, budget, SWAMachine) is None, budget


@pytest.mark.parametrize("name", sorted(SWA_MUTANTS))
def test_each_swa_mutant_is_caught_with_its_invariant(name: str) -> None:
    got = caught(target_of(f"tests.zoo.sglang.mutants:{name}"), SWA_SCHEDULE, SWAMachine)
    assert got is not None, f"{name} escaped the schedule"
    found, _ = got
    assert found.found.family.value in SWA_MUTANTS[name].caught_by, found.found
    assert found.violation.family == found.found.family, found.violation
    assert len(found.program) <= MAX_SHRUNK, found.program


def test_the_fuzz_zoo_lists_every_mutant_with_the_level_that_judges_it() -> None:
    zoo = fuzz_zoo()
    assert set(SWA_MUTANTS) <= set(zoo)
    assert {zoo[name].levels for name in SWA_MUTANTS} == {("swa_radix_cache",)}
    assert {zoo[name].levels for name in REQUEST_MUTANTS} == {("request_level",)}
    others = set(zoo) - set(SWA_MUTANTS) - set(REQUEST_MUTANTS)
    assert others and {zoo[name].levels for name in others} == {("radix_cache",)}


def test_the_fuzz_zoo_runs_an_swa_mutant_through_the_swa_level(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m fuzz --family sglang zoo``: a FULL + SWA mutant is fuzzed through the SWA
    machine (the FULL one skips a FULL + SWA target) and found with its invariant."""
    assert main(["--family", "sglang", "zoo", "--seconds", "20", "--only",
                 "swa_window_one_short"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("| swa_window_one_short |"))
    found, _, _, invariant, expected, level = [c.strip() for c in row.strip("|").split("|")][1:]
    assert (found, expected, level) == ("yes", "yes", "swa_radix_cache"), row
    assert invariant in SWA_MUTANTS["swa_window_one_short"].caught_by
