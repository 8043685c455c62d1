"""``num_tokens_total`` of every block of a live table is its chain's depth, a sliding window's
dropped prefix included (docs/API.md §3.2, docs/CONTRACT.md on ``BlockTable.fork``), checked
after every step where the target's blocks expose it
(``models.families.v0.checks._table_totals``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from models.core.invariants import Violation
from models.families.v0.capabilities import Config
from models.families.v0.invariants import Family
from models.families.v0.operations import Op, op_from_json
from models.families.v0.oracle import Oracle
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0.adapter.observation import ObservationReads
from properties.families.v0.runner import Runner
from tests.model.judged import run_judged

#: A window of one block drops the first of two full blocks (the null block takes its place),
#: then the table is forked: the survivor is the first of its chain yet counts 8 tokens.
PROGRAM: list[Op] = [op_from_json(op) for op in (
    {'op': 'table_allocate', 'tokens': [0] * 8, 'device': 'gpu', 'extra_hash': None,
     'window': 1},
    {'op': 'table_append', 'table': 0, 'tokens': [], 'lookahead': 0, 'computed': 8},
    {'op': 'table_fork', 'table': 0},
)]
SHAPE = (4, 3, 0)


def test_the_bundled_allocator_shows_chain_depths_past_the_window() -> None:
    target = load_target(DEFAULT_SPEC)
    config = Config(*SHAPE, target.caps)
    runner, oracle = Runner(target, config), Oracle(config)
    oracle.initial_check(runner.snapshot())
    for op in PROGRAM:
        outcome, snapshot = runner.execute(op)
        oracle.step(op, outcome, snapshot)
    # both tables show the null block (no total) and the survivor counting the dropped block
    assert snapshot.table_totals == {0: (None, 8), 1: (None, 8)}


def test_a_fork_that_drops_the_total_is_caught() -> None:
    mutant = "tests.zoo.v0.broken:fork_drops_total"
    run_judged(PROGRAM[:2], mutant, shape=SHAPE)  # the bug is in the fork only
    with pytest.raises(Violation) as found:
        run_judged(PROGRAM, mutant, shape=SHAPE)
    assert found.value.family is Family.TABLE
    assert "table 1[1]: num_tokens_total" in str(found.value)
    assert "expected: 8" in str(found.value) and "observed: 4" in str(found.value)


class _Total:
    num_tokens_total = 3


class _NoTotal:
    pass


class _Null:
    @property
    def num_tokens_total(self) -> int:
        raise NotImplementedError


def test_the_read_is_capability_detected() -> None:
    """A table with a block whose class has no ``num_tokens_total`` shows none (not
    checked); a block that does not define it (the null block) shows ``None``."""
    read = ObservationReads.table_totals
    assert read(None, SimpleNamespace(blocks=[_Total(), _NoTotal()])) is None  # type: ignore[arg-type]
    assert read(None, SimpleNamespace(blocks=[_Null(), _Total()])) == (None, 3)  # type: ignore[arg-type]
