"""Each entry of ``--xfails-file`` replays its counterexample: it must still fail with a
violation the entry matches (family, and its ``match`` narrowing if any), or the entry is stale
and reported as a failure. A violation the entry does not match fails the test."""

from __future__ import annotations

import pytest

from models.capabilities import Config, tolerating
from models.families import Violation
from models.operations import op_from_json
from properties.plugin import ExpectedFailure, expected_entries, record, tolerated_by
from properties.replay import run_program
from properties.selection import current_target


def test_expected_failure(expected_failure: ExpectedFailure, request: pytest.FixtureRequest
                          ) -> None:
    """The entry's program is judged with the other entries' tolerated deviations only."""
    target = current_target()
    tolerated = tolerated_by(expected_entries(request.config), expected_failure)
    config = Config(caps=tolerating(target.caps, tolerated), **expected_failure.config)
    program = [op_from_json(op) for op in expected_failure.program]
    try:
        run_program(target, config, program)
    except Violation as violation:
        history = program[: (violation.step or 0) + 1]
        if not expected_failure.matches(violation, history):
            raise
        record(expected_failure, violation)
        pytest.xfail(f"{expected_failure.id}: {expected_failure.explanation}")
    pytest.fail(f"expected failure {expected_failure.id!r} no longer fails: remove the entry")
