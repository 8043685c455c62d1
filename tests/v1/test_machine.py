"""The v1 executor and machine against the newest release's pool (vLLM 0.34.0): clean runs,
probes, replays."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from models.families.v1 import ops
from models.families.v1.invariants import Family
from models.families.v1.pool_model import PoolConfig
from properties.core.determinism import fixed_constants
from properties.families.v1 import upstream
from properties.families.v1.executor import Executor, run_program
from properties.families.v1.machine import FINDINGS, bind
from properties.families.v1.targets import PoolTarget, vllm_v1_block_pool

pytestmark = pytest.mark.skipif(upstream.cached_wheel() is None,
                                reason=f"vllm 0.34.0 wheel not cached: `{upstream.FETCH_COMMAND}`")
CONFIG = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2, 4))


@pytest.fixture(scope="module")
def target() -> PoolTarget:
    return vllm_v1_block_pool()


def test_engine_program_conforms(target: PoolTarget) -> None:
    program = [ops.Req(tokens=(1, 2, 3, 4, 5)), ops.GetNew(3), ops.CacheFull(0, (1, 2, 3), 0, 2, 0),
               ops.TakeEvents(), ops.Req(tokens=(1, 2, 3, 4, 0)), ops.Lookup(1, 1, (0,)),
               ops.Touch((1, 2)), ops.Free((3, 2, 1)), ops.Free((2, 1)), ops.TakeEvents(),
               ops.Reset(), ops.TakeEvents()]
    ex = run_program(target, CONFIG, program)
    assert ex.model.free[:1] == [3] and not ex.model.keys


def test_a_wrong_model_expectation_is_reported_with_its_program(target: PoolTarget) -> None:
    ex = Executor(target, CONFIG)
    ex.step(ops.GetNew(2))
    ex.model.ref[1] = 2  # pretend the model disagrees: the next check must name RC
    with pytest.raises(Violation) as info:
        ex.step(ops.TakeEvents())
    assert info.value.family is Family.RC
    assert any("get_new_blocks" in note for note in info.value.__notes__)


def test_misuse_probes_leave_the_run_pool_alone(target: PoolTarget) -> None:
    ex = Executor(target, CONFIG)
    ex.step(ops.Req(tokens=(1, 1, 1, 1)))
    ex.step(ops.GetNew(2))
    before = ex.adapter.snapshot()
    found = {k: ex.probe(k, 0) for k in ("double_free", "negative_count", "cache_beyond_hashes")}
    assert ex.adapter.snapshot() == before
    ex.check()
    assert found["double_free"] is not None and "silently" in found["double_free"].detail
    assert found["negative_count"] is not None


def test_machine_runs_clean_and_collects_findings(target: PoolTarget) -> None:
    FINDINGS.clear()
    # Clean of the release's known deviations (their xfails entries' features are left out), and
    # generated without the local-constants pool, so edits elsewhere do not change the run.
    known = frozenset({"window_nulls", "partial_blocks", "evict_held", "duplicates"})
    with fixed_constants():
        run_state_machine_as_test(bind(target, avoid=known), settings=settings(
            max_examples=30, stateful_step_count=30, derandomize=True, database=None,
            deadline=None, suppress_health_check=list(HealthCheck)))
    assert FINDINGS  # upstream accepts a double free silently


def test_unpin_move_and_announce_conform(target: PoolTarget) -> None:
    """0.34's transfer and copy-on-write API under the model: an unpinned page joins the tail
    and its reader hears of its reuse; moved keys keep serving hits from the copy."""
    program = [ops.Req(tokens=(1, 2, 3, 4)), ops.GetNew(3), ops.CacheFull(0, (1, 2), 0, 2, 0),
               ops.Unpin((3,)), ops.GetNew(1), ops.MoveHashes(2, 4), ops.Free((4,)),
               ops.Lookup(0, 1, (0,)), ops.Lookup(0, 0, (0,)), ops.Touch((1,)),
               ops.EmitCached(0, 1, 0), ops.TakeEvents(),
               ops.Free((2, 1, 1), evict_first=True)]
    ex = run_program(target, CONFIG, program)
    assert ex.model.free[-2:] == [3, 4] and ex.model.watchers == {3: None}
    assert ex.model.free[:2] == [2, 1]  # evict_first: keyed blocks at the head too
    ex.step(ops.GetNew(7))  # hands out the unpinned block: its reader is told
    assert ex.model.primary == {} and ex.model.watchers == {}
    with pytest.raises(Violation) as info:
        ex.step(ops.Lookup(0, 0, (0,)))
        ex.adapter.reused.append(5)  # a report for a block nobody unpinned
        ex.check()
    assert info.value.family is Family.CONTENT


def test_caching_off_machine_conforms(target: PoolTarget) -> None:
    config = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2, 6), caching=False)
    with fixed_constants():
        run_state_machine_as_test(bind(target, config), settings=settings(
            max_examples=40, stateful_step_count=30, derandomize=True, database=None,
            deadline=None, suppress_health_check=list(HealthCheck)))


def test_second_pool_probes_report_upstream(target: PoolTarget) -> None:
    """A block of another pool reaching touch changes this pool's free count (a finding)."""
    ex = run_program(target, CONFIG, [ops.GetNew(1)])
    finding = ex.probe("touch_foreign", 0)
    assert finding is not None and "num_free" in finding.detail
    assert ex.probe("unpin_null", 0) is None  # refused (an assertion) before any change


def test_unpin_and_move_misuse_findings(target: PoolTarget) -> None:
    """0.34 asserts per unpinned entry (the first one's reference is already gone) and keys
    the null block when keys move onto it."""
    ex = run_program(target, CONFIG, [ops.Req(tokens=(1, 2, 3, 4)), ops.GetNew(2),
                                      ops.CacheFull(0, (1, 2), 0, 2, 0)])
    unpin = ex.probe("unpin_unheld", 0)
    assert unpin is not None and "ref_cnt" in unpin.detail
    move = ex.probe("move_onto_null", 0)
    assert move is not None and "block_hash" in move.detail
    assert ex.probe("move_onto_keyed", 0) is None
