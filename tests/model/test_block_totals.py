"""``num_tokens_total`` of every live prefix-caching block is the token count of its chain up
to and including it (docs/API.md §3), checked after every step (``models.families.v0.checks``)."""

from __future__ import annotations

import pytest

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from tests.model.judged import run_judged

#: A full block (handle 0), a block chained to it that decodes one token at a time (1), and a
#: fork of the pair (2, 3).
PROGRAM: list[ops.Op] = [ops.AllocateImmutable(None, (1, 2)), ops.AllocateMutable(0),
                         ops.Append(1, (3,)), ops.Fork(1), ops.Append(3, (4,))]


def test_the_bundled_allocator_shows_chain_totals() -> None:
    _, oracle = run_judged(PROGRAM, shape=(2, 4, 2))
    assert [len(oracle.model.blocks[h].tokens) for h in range(4)] == [2, 1, 2, 2]


def test_a_total_that_leaves_out_the_predecessors_is_caught() -> None:
    with pytest.raises(Violation) as found:
        run_judged(PROGRAM, "tests.zoo.v0.broken:tokens_total_not_chained", shape=(2, 4, 2))
    assert found.value.family is Family.TABLE
    # the chained block, as soon as it exists: 2 tokens before it, none of its own
    assert "block 1: num_tokens_total" in str(found.value)
    assert "expected: 2" in str(found.value) and "observed: 0" in str(found.value)
