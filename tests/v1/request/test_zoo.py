"""Each broken manager (vLLM 0.33.0 with one patch) is caught by the request machine, in its
family: the request level's checks can fail. Derandomized, without shrinking (a verdict)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

import properties.core.profiles  # noqa: F401  (registers the profiles)
from models.core.invariants import Violation
from properties.core.determinism import fixed_constants
from properties.families.v1.request.machine import bind
from properties.families.v1.request.target import CONFIGS
from properties.families.v1.request.zoo import ZOO, Broken


@pytest.mark.parametrize("broken", ZOO, ids=[b.name for b in ZOO])
def test_broken_manager_is_caught(broken: Broken) -> None:
    machine = bind(broken.target(), CONFIGS[broken.config], frozenset({"preempt_scheduled"}))
    with fixed_constants(), pytest.raises(Violation) as info:
        run_state_machine_as_test(
            machine, settings=settings(settings.get_profile("mutation"), max_examples=200))
    assert info.value.family in broken.families, str(info.value)
