"""The v1 request-level state machine against the selected manager (``--manager``).

One run per machine configuration (`CONFIGS`: full attention, sliding window, hybrid full +
sliding window with equal and with different block sizes). A violation
listed in the manager xfails file (same family, at one of its operations) makes the run an
expected failure naming the entry; anything else fails with the replayable program in the
exception notes. Known deviations' generator features are left out (``avoid``), so the rest
is still explored.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from properties.core.collector import machine_collector
from properties.core.determinism import fixed_constants
from properties.core.plugin import parse_expected, record
from properties.families.v1.request.machine import bind
from properties.families.v1.request.target import CONFIGS, ManagerTarget
from properties.families.v1.stepping import PROGRAM_ATTR
from properties.families.v1.test_pool_level import matching_entry


@pytest.mark.parametrize("config_name", sorted(CONFIGS))
def test_kv_cache_manager(manager_target: ManagerTarget, manager_xfails: list[dict[str, Any]],
                          config_name: str) -> None:
    avoid = frozenset(f for e in manager_xfails for f in e.get("avoid", ()))
    machine = bind(manager_target, CONFIGS[config_name], avoid=avoid)
    with fixed_constants(), machine_collector():
        try:
            run_state_machine_as_test(machine, settings=settings())
        except Violation as v:
            entry = matching_entry(v, manager_xfails)
            if entry is None:
                raise
            # The mechanism it absorbed (the program's kinds before the failing step, as
            # Hypothesis shrank it), for the per-entry report and --strict-xfails.
            program = getattr(v, PROGRAM_ATTR, [])
            record(parse_expected([entry])[0], v, [op.kind for op in program[:-1]])
            pytest.xfail(f"{entry['id']} ({entry['class']}): {v.family.value} {v.message}")
