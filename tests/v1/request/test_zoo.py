"""Each broken manager (vLLM 0.33.0 with one patch) is caught by the request machine on the
core's ``OracleMachine``, with one of its invariants: the request level's checks can fail.
Derandomized (the ``mutation`` profile: a verdict, no Hypothesis shrinking); the variant is
selected by its spec, as ``prefixcache check --allocator`` would."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

import properties.core.profiles  # noqa: F401  (registers the profiles)
from models.core.invariants import Violation
from properties.core import selection
from properties.core.determinism import fixed_constants
from properties.core.targets import load_target
from properties.families.v1.request.family import FAMILY
from properties.families.v1.request.machine import ManagerMachine, bind
from properties.families.v1.request.target import CONFIGS
from properties.families.v1.request.zoo import ZOO, Broken, spec_of


@pytest.mark.parametrize("broken", ZOO, ids=[b.name for b in ZOO])
def test_broken_manager_is_caught(broken: Broken, monkeypatch: pytest.MonkeyPatch) -> None:
    target = load_target(spec_of(broken))
    assert target.family == FAMILY.name
    # The features the conformance files avoid stay avoided: each variant is caught elsewhere.
    monkeypatch.setattr(ManagerMachine, "avoid",
                        frozenset({"preempt_scheduled", "duplicate_events"}))
    with selection.kept(), fixed_constants(), pytest.raises(Violation) as info:
        selection.use(target)
        run_state_machine_as_test(
            bind(CONFIGS[broken.config]),
            settings=settings(settings.get_profile("mutation"), max_examples=200))
    assert info.value.family in broken.families, str(info.value)
