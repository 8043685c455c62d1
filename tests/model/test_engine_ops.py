"""Engine-side operations: the model's answers for the common computed prefix, bursts of
hits, and the sequence trackers, checked against the bundled allocator, and a wrong answer is
flagged with the right family."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, Op
from models.families.v0.oracle import Oracle, OutOfContract
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0.runner import Runner

F = Family


def _run(program: Sequence[Op], *, bs: int = 2, gpu: int = 6,
         tamper: object = None) -> tuple[Oracle, list[object]]:
    """Run ``program`` on the bundled allocator under the oracle; with ``tamper``, the last
    step's value is replaced by it before the oracle judges it."""
    target = load_target(DEFAULT_SPEC)
    config = Config(bs, gpu, 0, target.caps)
    runner, oracle = Runner(target, config), Oracle(config)
    oracle.initial_check(runner.snapshot())
    values = []
    for i, op in enumerate(program):
        outcome, snapshot = runner.execute(op)
        assert outcome.error is None, outcome.detail
        if tamper is not None and i == len(program) - 1:
            outcome = replace(outcome, value=tamper)
        values.append(outcome.value)
        oracle.step(op, outcome, snapshot)
    return oracle, values


PROMPT = ops.TableAllocate((1, 2, 3, 4, 5))
SIBLING = ops.TableAllocate((1, 2, 3, 9, 5))


def test_common_computed_ids_is_the_common_prefix() -> None:
    chain = ops.AllocateImmutableChain(None, ((1, 2), (3, 4)))
    other = ops.AllocateImmutableChain(0, ((5, 6),))
    prog: list[Op] = [chain, other, ops.AllocateImmutable(None, (7, 7))]
    _, values = _run([*prog, ops.CommonComputedIds(((0, 1), (0, 2), ()))])
    assert values[-1] == [0]
    _, values = _run([*prog, ops.CommonComputedIds(((0, 1, 2),))])
    assert values[-1] == [0, 1, 2]
    _, values = _run([*prog, ops.CommonComputedIds(((), ()))])
    assert values[-1] == ""  # upstream's commonprefix of no list
    with pytest.raises(Violation) as err:
        _run([*prog, ops.CommonComputedIds(((0, 1), (0, 2)))], tamper=[0, 1])
    assert err.value.family is F.COMPUTED


def test_hit_burst_crosses_the_rate_window() -> None:
    prog: list[Op] = [ops.AllocateImmutable(None, (1, 2)), ops.HitBurst(0, 1001), ops.HitRate()]
    _, values = _run(prog)
    assert values[-1] == pytest.approx(1001 / 1002)
    with pytest.raises(Violation) as err:
        _run(prog, tamper=1.0)
    assert err.value.family is F.HIT


def test_hit_burst_needs_held_cached_content() -> None:
    oracle, _ = _run([ops.AllocateImmutable(None, (1, 2)), ops.AllocateMutable(None)])
    assert oracle.contract_error(ops.HitBurst(0, 5)) is None
    assert oracle.contract_error(ops.HitBurst(1, 5)) is not None  # not hashed
    assert oracle.contract_error(ops.HitBurst(0, 5, Dev.GPU, 7)) is not None  # other key


def test_cached_tokens_freeze_during_prefill() -> None:
    start: list[Op] = [PROMPT, ops.TrackerStart(), ops.SeqTrack(0)]
    _, values = _run([*start, ops.SeqCachedTokens(0, True)])
    assert values[-1] == 0  # nothing computed yet
    later: list[Op] = [*start, ops.SeqCachedTokens(0, True), ops.MarkComputed()]
    _, values = _run([*later, ops.SeqCachedTokens(0, True)])
    assert values[-1] == 0  # frozen while in prefill
    _, values = _run([*later, ops.SeqCachedTokens(0, False)])
    assert values[-1] == 4  # two full blocks, now computed
    with pytest.raises(Violation) as err:
        _run([*later, ops.SeqCachedTokens(0, True)], tamper=4)  # a tracker that never freezes
    assert err.value.family is F.COMPUTED


def test_cached_tokens_stop_at_the_first_uncached_block() -> None:
    prog: list[Op] = [PROMPT, ops.MarkComputed(), SIBLING, ops.MarkComputed(),
                      ops.TrackerStart(), ops.SeqTrack(1), ops.SeqCachedTokens(1, False)]
    _, values = _run(prog)
    assert values[-1] == 4  # (1 2) is shared, (3 9) is computed by now too
    _, values = _run([PROMPT, ops.MarkComputed(), SIBLING, ops.TrackerStart(), ops.SeqTrack(1),
                      ops.SeqCachedTokens(1, False)])
    assert values[-1] == 2  # (3 9) not computed yet


def test_computed_ids_stop_growing_at_a_gap() -> None:
    prog: list[Op] = [PROMPT, ops.TrackerStart(), ops.SeqTrack(0), ops.SeqComputedIds(0)]
    oracle, values = _run(prog)
    assert values[-1] == []  # a gap at once: nothing is computed
    assert oracle.model.seqs.entries[0].gap
    oracle, values = _run([*prog, ops.MarkComputed(), ops.SeqComputedIds(0)])
    assert values[-1] == []  # the gap is remembered
    _, values = _run([PROMPT, ops.MarkComputed(), ops.TrackerStart(), ops.SeqTrack(0),
                      ops.SeqComputedIds(0)])
    assert values[-1] == [0, 1]  # the last block is skipped
    with pytest.raises(Violation) as err:
        _run([*prog, ops.MarkComputed(), ops.SeqComputedIds(0)], tamper=[0, 1])
    assert err.value.family is F.COMPUTED


def test_stamped_blocks_take_the_sequence_access_time() -> None:
    prog: list[Op] = [PROMPT, ops.TrackerStart(), ops.SeqTrack(0), ops.SeqStampBlocks(0)]
    oracle, _ = _run(prog)
    assert oracle.model.pools[Dev.GPU].accessed == {0: -1.0, 1: -1.0, 2: -1.0}  # no time yet
    oracle, _ = _run([*prog, ops.SeqAccess(0, 5.0), ops.SeqStampBlocks(0)])
    assert oracle.model.pools[Dev.GPU].accessed == {0: 5.0, 1: 5.0, 2: 5.0}


def test_tracker_contract() -> None:
    oracle, _ = _run([PROMPT])
    with pytest.raises(OutOfContract):
        oracle.step(ops.SeqTrack(0), ops.Outcome(), oracle_snapshot(oracle))
    oracle, _ = _run([PROMPT, ops.TrackerStart(), ops.SeqTrack(0)])
    assert oracle.is_misuse(ops.SeqTrack(0))  # already tracked: refused
    assert oracle.contract_error(ops.SeqComputedIds(1)) is not None  # never existed
    oracle, _ = _run([PROMPT, ops.TrackerStart(), ops.SeqTrack(0), ops.SeqUntrack(0, False)])
    assert oracle.contract_error(ops.SeqTrack(0)) is not None  # its computed entry is left
    assert oracle.is_misuse(ops.SeqAccess(0, 1.0))  # no longer tracked: refused
    oracle, _ = _run([PROMPT, ops.TrackerStart(), ops.SeqTrack(0), ops.SeqComputedIds(0),
                      ops.SeqUntrack(0, True)])
    assert 0 not in oracle.model.seqs.entries


def oracle_snapshot(oracle: Oracle) -> ops.Snapshot:
    return ops.Snapshot(free={Dev.GPU: oracle.free_count(Dev.GPU), Dev.CPU: 0})


def test_engine_ops_round_trip_json() -> None:
    for op in (ops.CommonComputedIds(((0, 1), ())), ops.HitBurst(3, 1001, Dev.CPU, 7),
               ops.TrackerStart(), ops.SeqTrack(1), ops.SeqUntrack(1, False),
               ops.SeqCachedTokens(2, False), ops.SeqComputedIds(0), ops.SeqAccess(0, 1.5),
               ops.SeqStampBlocks(4)):
        assert ops.op_from_json(ops.op_to_json(op)) == op


@pytest.mark.parametrize("op", [
    ops.SeqTrack(0),  # already tracked
    ops.SeqAccess(1, 1.0), ops.SeqStampBlocks(1), ops.SeqUntrack(1),  # never tracked
    ops.SeqComputedIds(1),
])
def test_tracker_misuse_is_refused_and_changes_nothing(op: Op) -> None:
    """Adding a tracked sequence again, or naming one a tracker does not hold: a typed
    error from the first tracker call, before anything changed."""
    start: list[Op] = [PROMPT, SIBLING, ops.TrackerStart(), ops.SeqTrack(0)]
    oracle, _ = _run(start)
    assert oracle.is_misuse(op)
    target = load_target(DEFAULT_SPEC)
    config = Config(2, 6, 0, target.caps)
    runner, fresh = Runner(target, config), Oracle(config)
    fresh.initial_check(runner.snapshot())
    for step in (*start, op):
        outcome, snapshot = runner.execute(step)
        fresh.step(step, outcome, snapshot)
    assert outcome.error is ops.ErrorKind.MISUSE, outcome.detail


def test_tracker_repeat_questions() -> None:
    """Asked again with no new block, the computed-id list comes back unchanged; once it
    has a gap it never grows again."""
    start: list[Op] = [PROMPT, ops.TrackerStart(), ops.SeqTrack(0), ops.MarkComputed()]
    _, values = _run([*start, ops.SeqComputedIds(0), ops.SeqComputedIds(0)])
    assert values[-1] == values[-2] == [0, 1]
    with pytest.raises(Violation) as err:
        _run([*start, ops.SeqComputedIds(0), ops.SeqComputedIds(0)], tamper=[0])
    assert err.value.family is F.COMPUTED
