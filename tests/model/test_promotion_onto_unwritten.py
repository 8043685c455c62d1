"""A block that fills with the content of a cached id whose KV was never written (its request
was freed before any mark) may stay on its own id (the bundled allocator retires the unwritten
entry) or move onto the cached one (vLLM 0.8 and Aphrodite 0.6.5 do). The move is a deviation
only when it leaves behind KV already computed into the block's own id: a mark between two
appends (``promotion-onto-unwritten``, CONTENT). A block that was empty and takes all its
tokens in the append that fills it has no KV anywhere yet; the batch writes it into the id the
block shows after the append, so the move conforms.

The moving target is the zoo's ``promote_onto_unwritten`` (the bundled allocator with the
retirement removed), so no wheel is needed; vLLM 0.8 and Aphrodite 0.6.5 are checked too when
their wheels are cached.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from models.families.v0.operations import Op
from properties.core.targets import DEFAULT_SPEC
from properties.families.v0 import upstream
from tests.model.judged import run_judged

MOVES = "tests.zoo.v0.broken:promote_onto_unwritten"
SHAPE = (2, 2, 0)  # block size 2, two GPU ids, no CPU

#: Tokens [2, 0] cached by a request freed before any mark, then a new block that takes
#: both in the append that fills it: no mark anywhere.
EMPTY_BLOCK = [ops.AllocateImmutable(None, (2, 0)), ops.Free(0), ops.AllocateMutable(None),
               ops.Append(1, (2, 0))]
#: The same, the block decoding one token at a time, with the batch run (a mark) between.
MARK_BETWEEN = [ops.AllocateImmutable(None, (5, 6)), ops.Free(0), ops.AllocateMutable(None),
                ops.Append(1, (5,)), ops.MarkComputed(), ops.Append(1, (6,))]
#: Two appends in one step (no mark between): nothing computed yet, nothing lost.
NO_MARK_BETWEEN = [ops.AllocateImmutable(None, (5, 6)), ops.Free(0), ops.AllocateMutable(None),
                   ops.Append(1, (5,)), ops.Append(1, (6,))]


def _upstream_spec(name: str) -> str:
    """The upstream target ``name`` (``vllm`` or ``aphrodite``), or a skip naming the fetch."""
    load = upstream.load_aphrodite if name == "aphrodite" else upstream.load_vllm_v0
    try:
        load()
    except upstream.UpstreamSourceMissing as exc:
        pytest.skip(f"upstream wheel not cached ({exc}); fetch it with "
                    f"`python -m properties.upstream fetch {name}`")
    spec = "aphrodite_allocator" if name == "aphrodite" else "vllm_v0_allocator"
    return f"properties.upstream:{spec}"


def _last_id(program: Sequence[Op], spec: str) -> object:
    _, oracle = run_judged(program, spec, shape=SHAPE)
    return oracle.model.blocks[1].id


@pytest.mark.parametrize("program", [EMPTY_BLOCK, NO_MARK_BETWEEN], ids=["empty", "no-mark"])
def test_a_move_that_leaves_no_computed_kv_behind_conforms(program: list[Op]) -> None:
    """Both choices conform: the mover lands on the unwritten id 0, the bundled allocator
    keeps its own id 1."""
    assert _last_id(program, MOVES) == 0
    assert _last_id(program, DEFAULT_SPEC) == 1


def test_the_moved_block_is_revived_uncomputed_and_a_mark_computes_it() -> None:
    """After the move the id is not computed until the batch runs: the model answers
    ``get_computed_block_ids`` with nothing before the mark and with the id after it."""
    before, _ = run_judged([*EMPTY_BLOCK, ops.ComputedBlockIds((1,), False)], MOVES,
                           shape=SHAPE)
    after, _ = run_judged([*EMPTY_BLOCK, ops.MarkComputed(), ops.ComputedBlockIds((1,), False)],
                          MOVES, shape=SHAPE)
    assert before[-1] == (None, []) and after[-1] == (None, [0])


def test_reporting_the_moved_unwritten_id_computed_is_a_deviation() -> None:
    """A mover that also reports the revived id computed before the mark (upstream's
    ``computed=True``) names unwritten KV as computed: COMPUTED, at the query."""
    with pytest.raises(Violation) as found:
        run_judged([*EMPTY_BLOCK, ops.ComputedBlockIds((1,), False)], MOVES, shape=SHAPE,
                   tamper=[0])
    assert found.value.family is Family.COMPUTED
    assert "freed before any mark" in str(found.value)


def test_a_move_that_leaves_computed_kv_behind_is_a_deviation() -> None:
    """A mark between the appends computed token 5's KV into id 1: moving onto id 0 loses it."""
    with pytest.raises(Violation) as found:
        run_judged(MARK_BETWEEN, MOVES, shape=SHAPE)
    assert found.value.family is Family.CONTENT
    run_judged(MARK_BETWEEN[:-1], MOVES, shape=SHAPE)  # only the last append is flagged
    assert "without a copy: the KV of its first 1 token(s) was computed in id 1" \
        in str(found.value)
    assert _last_id(MARK_BETWEEN, DEFAULT_SPEC) == 1  # staying put conforms


@pytest.mark.parametrize("name", ["vllm", "aphrodite"])
def test_upstream_empty_block_move_conforms_mark_between_does_not(name: str) -> None:
    """vLLM 0.8 and Aphrodite 0.6.5 move in both programs; only the second is their bug."""
    spec = _upstream_spec(name)
    assert _last_id(EMPTY_BLOCK, spec) == 0
    with pytest.raises(Violation) as found:
        run_judged(MARK_BETWEEN, spec, shape=SHAPE)
    assert found.value.family is Family.CONTENT
    assert "was computed in id 1, never in id 0" in str(found.value)
