"""The replay of one expected failure (an ``--xfails-file`` entry), for any family: its
program, run on the selected target (built as the entry's allocator type) under the judge with
the other entries' tolerated deviations, must still raise a violation the entry matches.

A family's machines folder holds ``def test_expected_failure(expected_failure, request):
replay_expected(expected_failure, request.config)``; the plugin parametrizes it with the
entries. :func:`machine_session` is the fixture body of a family whose machines leave out the
generator features the entries ``avoid``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from models.core.invariants import Violation
from properties.core import selection
from properties.core.baseline import Resolver
from properties.core.plugin import (
    ExpectedFailure,
    avoided,
    expected_entries,
    note_worse,
    record,
    tolerated_by,
)
from properties.core.replay import run_program
from properties.core.targets import load_target


def replay_expected(entry: ExpectedFailure, config: pytest.Config) -> None:
    """xfail when the entry's program still fails as it says; fail when it no longer fails
    (a stale entry: remove it) or fails otherwise; skip a ``flaky`` entry that passed, and one
    for other releases (``versions``). ``config``: the session's (its other entries' tolerated
    deviations apply)."""
    current = selection.current_target()
    if not entry.applies(current.xfails_release):
        pytest.skip(f"{entry.id} is listed for other releases ({', '.join(entry.versions)}) "
                    f"than {current.xfails_release or 'this target'}")
    if not entry.applies(current.xfails_release, current.judges):
        pytest.skip(f"{entry.id} needs the judge(s) {', '.join(sorted(entry.requires))}, "
                    "which this run does not have")
    target = current if entry.allocator_type in ("", current.allocator_type) else load_target(
        current.spec, family=current.family, allocator_type=entry.allocator_type)
    target = selection.tolerating(target, tolerated_by(expected_entries(config), entry))
    vocabulary = target.family_object.vocabulary
    program = [vocabulary.op_from_json(op) for op in entry.program]
    shape = vocabulary.config(target, entry.config)
    try:
        run_program(target, shape, program)
    except Violation as violation:
        history = program[: (violation.step or 0) + 1]
        kind = target.allocator_type
        mechanism = Resolver(target, shape, program, violation)
        if not entry.matches(violation, history, kind, mechanism):
            note_worse([entry], violation, history, kind, mechanism)
            raise
        record(entry, violation, mechanism.absorbed(entry.id, entry.keep(kind)), own=True)
        pytest.xfail(f"{entry.id}: {entry.explanation}")
    if entry.flaky:
        pytest.skip(f"{entry.id} is marked flaky (it depends on per-process state) and did not "
                    "reproduce in this process")
    pytest.fail(f"expected failure {entry.id!r} no longer fails: remove the entry")


def machine_session(config: pytest.Config, family: str, what: str, spec: str, machine: Any,
                    check: Callable[[frozenset[str]], frozenset[str]]) -> Iterator[None]:
    """For a test of ``family``'s machines: skip it unless the session's target is that
    family's (saying how to select one: ``--allocator spec``), and run it with
    ``machine.avoid`` set to the features the applicable entries ``avoid`` (``check``: the
    family's validation, a ``ValueError`` for a name its machines do not know, reported as a
    usage error); restored afterwards."""
    if selection.family_name() != family:
        pytest.skip(f"{what} judges a {family} target: --allocator {spec} (or --family "
                    f"{family})")
    try:
        avoid = check(avoided(config))
    except ValueError as exc:
        raise pytest.UsageError(f"--xfails-file: {exc}") from None
    saved = machine.avoid
    machine.avoid = avoid
    try:
        yield
    finally:
        machine.avoid = saved
