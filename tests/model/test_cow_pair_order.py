"""The copy-on-write pairs of one operation may come in any order: their destinations are
fresh, distinct ids, so the engine's batch copy ends the same. A missing, extra or reversed
pair is still COW."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.invariants import Family
from models.families.v0.oracle import Oracle
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0.runner import Runner

#: A table of one token with a second, empty block (lookahead), forked; the parent then
#: writes into both shared blocks in one append: two pairs in one operation.
PROGRAM = [ops.TableAllocate((1,)), ops.TableEnsureSlots(0, 3), ops.TableFork(0),
           ops.TableAppend(0, (2, 3, 4))]


def _judge_last(rewrite: object) -> tuple[list[tuple[int, int]], Oracle]:
    """Run PROGRAM on the bundled allocator; the last step's pairs pass through ``rewrite``
    before they are judged. The pairs the allocator recorded, and the oracle."""
    target = load_target(DEFAULT_SPEC)
    config = Config(2, 6, 0, target.caps)
    runner, oracle = Runner(target, config), Oracle(config)
    oracle.initial_check(runner.snapshot())
    recorded: list[tuple[int, int]] = []
    for i, op in enumerate(PROGRAM):
        outcome, snapshot = runner.execute(op)
        if i == len(PROGRAM) - 1:
            recorded = [tuple(p) for p in outcome.cows]  # type: ignore[misc]
            outcome = replace(outcome, cows=rewrite(list(outcome.cows)))  # type: ignore[operator]
        oracle.step(op, outcome, snapshot)
    return recorded, oracle


def test_two_pairs_of_one_operation_in_either_order_conform() -> None:
    recorded, _ = _judge_last(lambda cows: cows)
    assert len(recorded) == 2 and recorded[0][0] != recorded[1][0]
    _judge_last(lambda cows: cows[::-1])


@pytest.mark.parametrize("rewrite", [lambda cows: cows[:1],
                                     lambda cows: [*cows, cows[0]],
                                     lambda cows: [(d, s) for s, d in cows]],
                         ids=["missing", "repeated", "reversed pairs"])
def test_a_wrong_set_of_pairs_is_flagged(rewrite: object) -> None:
    with pytest.raises(Violation) as found:
        _judge_last(rewrite)
    assert found.value.family is Family.COW
