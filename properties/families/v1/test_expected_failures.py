"""Each ``--xfails-file`` entry (v1 family) still reproduces on the selected pool.

The entry's program is replayed with its config (no Hypothesis) and must raise a violation the
entry matches (the core's matching), reported as an expected failure; an entry that stops
reproducing fails here ("no longer fails: remove the entry"), so a fixed upstream bug is
noticed. An entry for other releases (``versions``) is skipped, naming them.
"""

from __future__ import annotations

from typing import Any

import pytest

from models.core.invariants import Violation
from models.families.v1 import ops
from properties.core.plugin import ExpectedFailure, note_worse, record
from properties.families.v1.executor import run_program
from properties.families.v1.reproducer import config_of
from properties.families.v1.targets import PoolTarget
from properties.families.v1.xfails import resolver

__all__ = ["config_of", "test_expected_failure"]


def test_expected_failure(expected_failure: ExpectedFailure, pool_target: PoolTarget,
                          pool_raw_xfails: list[dict[str, Any]]) -> None:
    if expected_failure.id not in {e["id"] for e in pool_raw_xfails}:
        pytest.skip(f"{expected_failure.id} is listed for other releases than "
                    f"{pool_target.version or 'this target'}")
    program = [ops.from_json(dict(r)) for r in expected_failure.program]
    config = config_of(expected_failure.config)
    try:
        run_program(pool_target, config, program)
    except Violation as violation:
        history = program[: (violation.step or 0) + 1]
        mechanism = resolver(violation, pool_target, config)
        if not expected_failure.matches(violation, history, None, mechanism):
            note_worse([expected_failure], violation, history, None, mechanism)
            raise
        record(expected_failure, violation, None if mechanism is None else mechanism(),
               own=True)
        pytest.xfail(f"{expected_failure.id}: {expected_failure.explanation}")
    pytest.fail(f"expected failure {expected_failure.id!r} no longer fails: remove the entry")
