"""Every request-level zoo mutant (patches of the bundled request API: ``checkpoint``,
``release_kv_cache``) is caught by the request level's machine under the fixed schedule, with
the invariant it breaks and a short program; the bundled reference passes the schedule."""

from __future__ import annotations

import pytest

from properties.families.sglang.machines.test_sglang_request import RequestMachine
from properties.families.sglang.targets import BUNDLED_SPEC
from tests.zoo.sglang.harness import SCHEDULE, catch, caught, target_of
from tests.zoo.sglang.mutants import REQUEST_MUTANTS, module

MAX_SHRUNK = 16


def test_the_request_zoo_patches_apply() -> None:
    assert len(REQUEST_MUTANTS) >= 4
    for name in REQUEST_MUTANTS:
        assert module(name) is not None


def test_the_bundled_reference_passes_the_request_schedule() -> None:
    target = target_of(BUNDLED_SPEC)
    for budget in SCHEDULE:
        assert catch(target, budget, RequestMachine) is None, budget


@pytest.mark.parametrize("name", sorted(REQUEST_MUTANTS))
def test_each_request_mutant_is_caught_with_its_invariant(name: str) -> None:
    got = caught(target_of(f"tests.zoo.sglang.mutants:{name}"), SCHEDULE, RequestMachine)
    assert got is not None, f"{name} escaped the schedule"
    found, _ = got
    assert found.found.family.value in REQUEST_MUTANTS[name].caught_by, found.found
    assert found.violation.family == found.found.family, found.violation
    assert len(found.program) <= MAX_SHRUNK, found.program
