"""Each entry of ``--xfails-file`` replays its counterexample against the selected target built
as the allocator type the entry was found with (``allocator_type``; the naive variant keeps the
selected target's disabled features): it must still fail with a violation the entry matches
(family, and its ``match`` narrowing if any, and no worse than its recorded ``measures``), or
the entry is stale and reported as a failure.
A violation the entry does not match fails the test. An entry marked ``flaky`` (written by
``--write-xfails`` when its program did not reproduce in a fresh process) that passes is
skipped with that reason instead."""

from __future__ import annotations

import pytest

from models.core.invariants import Violation
from models.families.v0.capabilities import Config, tolerating
from models.families.v0.operations import op_from_json
from properties.core.baseline import Resolver
from properties.core.plugin import (
    ExpectedFailure,
    expected_entries,
    note_worse,
    record,
    tolerated_by,
)
from properties.core.replay import run_program
from properties.families.v0.machines.variants import of_type


def test_expected_failure(expected_failure: ExpectedFailure, request: pytest.FixtureRequest
                          ) -> None:
    """The entry's program is judged with the other entries' tolerated deviations only, on the
    allocator type it was found with."""
    target = of_type(expected_failure.allocator_type)
    tolerated = tolerated_by(expected_entries(request.config), expected_failure)
    config = Config(caps=tolerating(target.caps, tolerated), **expected_failure.config)
    program = [op_from_json(op) for op in expected_failure.program]
    try:
        run_program(target, config, program)
    except Violation as violation:
        history = program[: (violation.step or 0) + 1]
        mechanism = Resolver(target, config, program, violation)
        if not expected_failure.matches(violation, history, target.allocator_type, mechanism):
            note_worse([expected_failure], violation, history, target.allocator_type, mechanism)
            raise
        keep = expected_failure.keep(target.allocator_type)
        record(expected_failure, violation, mechanism.absorbed(expected_failure.id, keep),
               own=True)
        pytest.xfail(f"{expected_failure.id}: {expected_failure.explanation}")
    if expected_failure.flaky:
        pytest.skip(f"{expected_failure.id} is marked flaky (it depends on per-process state) "
                    "and did not reproduce in this process")
    pytest.fail(f"expected failure {expected_failure.id!r} no longer fails: remove the entry")
