"""The reported counterexample is shrunk operation by operation, not only rule by rule.

The block-level machine's once-per-example ``malformed_sweep`` runs every malformed call in one
rule, so Hypothesis alone reports the whole sweep; :mod:`properties.core.shrink` cuts the reported
program down to what the failure needs, and the script it prints replays to the same family.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from models.families.v0.invariants import Family
from properties.core import selection
from properties.core.determinism import fixed_constants
from properties.core.targets import load_target
from properties.families.v0.machines.block_level import BlockLevelMachine
from properties.families.v0.replay import check_program

SPEC = "tests.zoo.v0.broken:hash_arguments_unchecked"
# No Hypothesis shrink phase: what this asserts is the program-level shrinker, which then cuts
# the first failing example as found (38 steps here) by itself; with Hypothesis's rule-level
# shrinking first (about 35 s, to 9 steps) it had less to do.
BUDGET = settings(max_examples=50, stateful_step_count=20, derandomize=True, database=None,
                  deadline=None, report_multiple_bugs=False,
                  phases=[Phase.explicit, Phase.reuse, Phase.generate],
                  suppress_health_check=list(HealthCheck))


def test_reported_script_is_the_program_shrunk(restore_target: None) -> None:
    selection.use(load_target(SPEC))
    with pytest.raises(Violation) as info, fixed_constants():
        run_state_machine_as_test(BlockLevelMachine, settings=BUDGET)
    assert info.value.family is Family.ATOMIC
    notes = "\n".join(getattr(info.value, "__notes__", []))
    shrunk = re.search(r"shrunk from (\d+) to (\d+) steps", notes)
    assert shrunk, notes
    before, after = int(shrunk[1]), int(shrunk[2])
    assert after < before and after <= 3, notes
    call = re.search(r"check_program\('([^']+)', '(\w+)', (\d+), (\d+), (\d+),\s+'(.*)'\)",
                     notes)
    assert call, notes
    program = json.loads(call[6])
    assert len(program) == after
    with pytest.raises(Violation) as replayed:
        check_program(call[1], call[2], int(call[3]), int(call[4]), int(call[5]), program)
    assert replayed.value.family is Family.ATOMIC
