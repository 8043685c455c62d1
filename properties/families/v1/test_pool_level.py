"""The v1 block-level state machine against the selected pool (``--pool``).

A violation listed in ``--pool-xfails-file`` (same family, at one of its operations) makes
the test an expected failure naming the entry; anything else fails with the replayable
program in the exception notes. Robustness findings of the misuse probes are printed in the
terminal summary and never fail the run.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from properties.core.determinism import fixed_constants
from properties.families.v1.machine import bind
from properties.families.v1.targets import PoolTarget


def matching_entry(v: Violation, entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    name = getattr(v.op, "name", None)
    for e in entries:
        match = e["match"]
        if (v.family.value == e["family"] and name in match.get("ops", [name])
                and match.get("message", "") in v.message):
            return e
    return None


def test_block_pool(pool_target: PoolTarget, pool_xfails: list[dict[str, Any]]) -> None:
    """Known deviations' generator features are left out (``avoid``), so the rest is explored."""
    avoid = frozenset(f for e in pool_xfails for f in e.get("avoid", ()))
    machine = bind(pool_target, avoid=avoid)
    with fixed_constants():
        try:
            run_state_machine_as_test(machine, settings=settings())
        except Violation as v:
            entry = matching_entry(v, pool_xfails)
            if entry is None:
                raise
            pytest.xfail(f"{entry['id']} ({entry['class']}): {v.family.value} {v.message}")
