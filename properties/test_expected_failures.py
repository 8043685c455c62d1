"""Each entry of ``--xfails-file`` replays its counterexample: it must still fail, with its
family, or the entry is stale and reported as a failure."""

from __future__ import annotations

import pytest

from models.capabilities import Config
from models.families import Violation
from models.operations import op_from_json
from properties.plugin import ExpectedFailure
from properties.replay import run_program
from properties.selection import current_target


def test_expected_failure(expected_failure: ExpectedFailure) -> None:
    target = current_target()
    config = Config(caps=target.caps, **expected_failure.config)
    program = [op_from_json(op) for op in expected_failure.program]
    try:
        run_program(target, config, program)
    except Violation as violation:
        if violation.family is not expected_failure.family:
            raise
        pytest.xfail(f"{expected_failure.id}: {expected_failure.explanation}")
    pytest.fail(f"expected failure {expected_failure.id!r} no longer fails: remove the entry")
