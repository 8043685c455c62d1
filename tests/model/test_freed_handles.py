"""Misuse of a freed block handle (docs/API.md §4.2): a double free is refused with an
``AssertionError`` (the class upstream's tests pin; a typed error of another builtin class is
flagged), and a write that fills a freed block, which would need an id to be promoted, is
refused with a typed error."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.core.invariants import Invariant, Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.error_classes import wrong_class
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, ErrorKind, Outcome
from models.families.v0.oracle import Oracle
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0.runner import Runner
from tests.model.judged import run_judged

F = Family
_FREED = [ops.AllocateMutable(None, Dev.GPU), ops.Append(0, (1,)), ops.Free(0)]


def test_double_free_is_an_assertion_error() -> None:
    values, _ = run_judged([*_FREED, ops.Free(0)], shape=(2, 4, 2))
    assert values[-1][0] is ErrorKind.MISUSE


@pytest.mark.parametrize(("builtins", "flagged"), [
    (("AssertionError",), False), (("ValueError",), True), (("KeyError", "LookupError"), True),
    ((), False),  # a target that does not say
])
def test_double_free_class_is_pinned(builtins: tuple[str, ...], flagged: bool) -> None:
    outcome = Outcome(ErrorKind.MISUSE, "refused", builtins)
    for op in (ops.Free(0), ops.TableFreeBlock(0, 0)):
        assert (wrong_class(op, outcome, "double free") is not None) is flagged


def test_fill_of_a_freed_block_is_refused() -> None:
    values, _ = run_judged([*_FREED, ops.Append(0, (2,))], shape=(2, 4, 2))
    assert values[-1][0] is ErrorKind.MISUSE


@pytest.mark.parametrize(("error", "family"), [
    (None, F.TABLE), (ErrorKind.UNEXPECTED, F.CRASH)])
def test_a_fill_of_a_freed_block_not_refused_as_misuse_is_flagged(
        error: ErrorKind | None, family: Invariant) -> None:
    """Accepted, or refused by a crash (e.g. a broken check raising ``TypeError``)."""
    target = load_target(DEFAULT_SPEC)
    config = Config(2, 4, 2, target.caps)
    runner, oracle = Runner(target, config), Oracle(config)
    oracle.initial_check(runner.snapshot())
    for op in _FREED:
        oracle.step(op, *runner.execute(op))
    op = ops.Append(0, (2,))
    outcome, snapshot = runner.execute(op)
    with pytest.raises(Violation) as info:
        oracle.step(op, replace(outcome, error=error, builtins=()), snapshot)
    assert info.value.family is family
