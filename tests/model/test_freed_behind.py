"""A table whose block was freed behind its back (``TableFreeBlock``) and the tracker calls to
refuse (``SeqLostBlocks``, ``SeqCachedTokensUnsized``): the model against the bundled
allocator (both types), vLLM 0.8 and the zoo mutants that each break one rule."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import pytest

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, ErrorKind, Op
from models.families.v0.oracle import Oracle, OutOfContract
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0.runner import Runner
from tests.model.judged import run_judged

F = Family
VLLM = "properties.upstream:vllm_v0_allocator"
#: Five tokens in blocks of two: table 0 holds two full blocks and a partial one.
TABLE = ops.TableAllocate((1, 2, 3, 4, 5))


#: ``run_judged`` on this module's default pool shape.
_run = partial(run_judged, shape=(2, 6, 0))


# --------------------------------------------------------------------------- freed behind


@pytest.mark.parametrize("allocator_type", ["prefix_caching", "naive"])
@pytest.mark.parametrize("refused", [ops.TableAppend(0, (6,)), ops.TableFree(0), ops.TableFork(0),
                                     ops.TableFreeBlock(0, 2)])
def test_a_call_touching_the_freed_block_is_refused_and_changes_nothing(
        allocator_type: str, refused: Op) -> None:
    out, oracle = _run([TABLE, ops.TableFreeBlock(0, 2), refused],
                       allocator_type=allocator_type)
    assert out[1][0] is None and out[2][0] is ErrorKind.MISUSE
    m = oracle.model
    assert m.pools[Dev.GPU].free == 4  # the freed block's id is back, the other two held
    assert 0 not in m.live_tables and m.tables[0].live
    m.self_check()


@pytest.mark.parametrize("allocator_type", ["prefix_caching", "naive"])
def test_the_other_blocks_are_given_back_one_by_one(allocator_type: str) -> None:
    program = [TABLE, ops.TableFreeBlock(0, 1), ops.TableFreeBlock(0, 0), ops.TableFreeBlock(0, 2),
               ops.TableAllocate((1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12))]
    out, oracle = _run(program, allocator_type=allocator_type)
    assert all(error is None for error, _ in out)
    assert oracle.model.pools[Dev.GPU].free == 0  # all six ids went round: nothing leaked


def test_a_table_still_showing_the_freed_id_is_a_table_violation() -> None:
    target = load_target(DEFAULT_SPEC)
    config = Config(2, 6, 0, target.caps)
    runner, oracle = Runner(target, config), Oracle(config)
    oracle.initial_check(runner.snapshot())
    oracle.step(TABLE, *runner.execute(TABLE))
    shown = runner.snapshot().tables[0]
    outcome, after = runner.execute(ops.TableFreeBlock(0, 0))
    assert after.tables[0] == (None, *shown[1:])
    stale = replace(after, tables={**after.tables, 0: shown})  # as if the id were still held
    with pytest.raises(Violation) as caught:
        oracle.step(ops.TableFreeBlock(0, 0), outcome, stale)
    assert caught.value.family is F.TABLE


def test_misuse_on_a_damaged_table_is_out_of_contract_for_vllm() -> None:
    """vLLM 0.8 claims no typed errors: it is fed the legal free, never the refusals."""
    _, oracle = _run([TABLE, ops.TableFreeBlock(0, 2), ops.TableFreeBlock(0, 0)], VLLM)
    assert oracle.is_misuse(ops.TableFree(0))
    target = load_target(VLLM)
    config = Config(2, 6, 0, target.caps)
    runner, fresh = Runner(target, config), Oracle(config)
    fresh.initial_check(runner.snapshot())
    for op in (TABLE, ops.TableFreeBlock(0, 2)):
        fresh.step(op, *runner.execute(op))
    outcome, snapshot = runner.execute(ops.TableAppend(0, (6,)))
    with pytest.raises(OutOfContract):
        fresh.step(ops.TableAppend(0, (6,)), outcome, snapshot)


def test_calls_that_do_not_touch_the_freed_block_are_left_open() -> None:
    _, oracle = _run([TABLE, ops.TableFreeBlock(0, 0)])
    # writes after the freed block, growth, swaps, queries and the trackers: left open
    for op in (ops.TableAppend(0, (6,)), ops.TableEnsureSlots(0, 4), ops.TableMarkAccessed(0, 1.0),
               ops.TableSlots(0, (1,), 0), ops.SeqComputedIds(0)):
        assert oracle.contract_error(op) is not None, op
    assert oracle.is_misuse(ops.TableFree(0)) and oracle.is_misuse(ops.TableFork(0))


def test_once_the_freed_object_may_be_reused_the_table_is_out_of_contract() -> None:
    """The pool may hand the freed object out again: the table then names an unknown block."""
    _, oracle = _run([TABLE, ops.TableFreeBlock(0, 2), ops.AllocateMutable(None)])
    for op in (ops.TableFree(0), ops.TableFork(0), ops.TableFreeBlock(0, 2)):
        assert oracle.contract_error(op) is not None, op
    assert oracle.contract_error(ops.TableFreeBlock(0, 0)) is None  # a block it still holds


def test_a_table_free_that_frees_before_it_checks_is_atomic_violation() -> None:
    with pytest.raises(Violation) as caught:
        _run([TABLE, ops.TableFreeBlock(0, 2), ops.TableFree(0)],
             "tests.zoo.v0.broken:table_free_before_check")
    assert caught.value.family is F.ATOMIC


def test_the_freed_block_of_a_sliding_window_table_is_out_of_contract() -> None:
    _, oracle = _run([ops.TableAllocate((1, 2, 3, 4, 5), window=1)])
    assert oracle.contract_error(ops.TableFreeBlock(0, 0)) is not None
    assert oracle.contract_error(ops.TableFreeBlock(0, 3)) is not None  # no such block


# --------------------------------------------------------------------------- trackers


#: A three-block table tracked, its blocks computed, then asked (list: its first two ids),
#: and a one-block table beside it.
TRACKED: list[Op] = [TABLE, ops.TableAllocate((1, 2)), ops.TrackerStart(), ops.SeqTrack(0),
                     ops.MarkComputed(), ops.SeqComputedIds(0)]


def test_a_sequence_that_lost_blocks_is_refused() -> None:
    out, oracle = _run([*TRACKED, ops.SeqLostBlocks(0, 1), ops.SeqComputedIds(0)])
    assert out[5][1] == [0, 1]
    assert out[6][0] is ErrorKind.MISUSE
    assert out[7] == (None, [0, 1])  # the list is as it was
    assert oracle.model.seqs.entries[0].computed == [0, 1]


def test_a_tracker_that_keeps_the_lost_blocks_is_caught() -> None:
    with pytest.raises(Violation) as caught:
        _run([*TRACKED, ops.SeqLostBlocks(0, 1)], "tests.zoo.v0.broken:tracker_keeps_lost_blocks")
    assert caught.value.family is F.COMPUTED


def test_lost_blocks_needs_a_list_longer_than_the_ids() -> None:
    _, oracle = _run(TRACKED)
    assert oracle.contract_error(ops.SeqLostBlocks(1, 0)) is not None  # 1 is not tracked
    assert oracle.contract_error(ops.SeqLostBlocks(0, 0)) is not None  # enough blocks
    assert oracle.is_misuse(ops.SeqLostBlocks(0, 1))


def test_cached_tokens_from_a_tracker_without_a_block_size_is_refused() -> None:
    out, _ = _run([TABLE, ops.SeqCachedTokensUnsized(0)])
    assert out[1][0] is ErrorKind.MISUSE


def test_a_list_with_a_gap_is_returned_as_it_was() -> None:
    """Asked before its blocks are computed the list is empty with a gap; it stays so."""
    program = [TABLE, ops.TrackerStart(), ops.SeqTrack(0), ops.SeqComputedIds(0),
               ops.MarkComputed(), ops.SeqComputedIds(0)]
    out, oracle = _run(program)
    assert out[3][1] == [] and out[5][1] == []
    assert oracle.model.seqs.entries[0].gap


def test_a_finished_sequence_stamped_with_its_access_time_is_evicted_in_that_order() -> None:
    """Stamped with time 5, sequence 0's blocks outlive sequence 1's (stamped at 0) in the
    evictor: the next allocations take sequence 1's ids first."""
    a, b = ops.TableAllocate((1, 2, 3, 4)), ops.TableAllocate((5, 6, 7, 8))
    program: list[Op] = [a, b, ops.TrackerStart(), ops.SeqTrack(0), ops.SeqTrack(1),
                         ops.SeqAccess(0, 5.0), ops.SeqAccess(1, 0.5), ops.SeqStampBlocks(0),
                         ops.SeqStampBlocks(1), ops.TableFree(0), ops.TableFree(1),
                         ops.AllocateMutable(None), ops.AllocateMutable(None),
                         ops.AllocateMutable(None), ops.AllocateMutable(None)]
    _, oracle = _run(program, shape=(2, 4, 0))
    m = oracle.model
    first_two = {m.blocks[h].id for h in (0, 1)}
    assert first_two == {2, 3}  # sequence 1's ids (stamped earlier) are evicted first
