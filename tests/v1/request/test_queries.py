"""The scheduler's queries the request level judges, on hand-made programs: each is driven
only where the release has it (detected from the manager class), and answers what the
contract says for a known state."""

from __future__ import annotations

import pytest

from models.core.invariants import Violation
from models.families.v1 import request_ops as ops
from models.families.v1.request_invariants import ManagerInvariants as Family
from properties.families.v1.request.executor import run_program
from properties.families.v1.request.target import (
    FULL,
    FULL_STATS,
    ManagerTarget,
    vllm_v033_manager,
    vllm_v034_manager,
)
from properties.families.v1.request.zoo import ZOO

# r0 (8 tokens, two whole blocks) runs one step; r1 shares its first block and waits.
PROGRAM = [ops.Add((0, 1, 2, 0, 1, 2, 0, 1), (2,)), ops.Schedule(0, 8), ops.EndStep(),
           ops.Add((0, 1, 2, 0, 2), (1,))]


@pytest.fixture(scope="module")
def v033() -> ManagerTarget:
    return vllm_v033_manager()


@pytest.fixture(scope="module")
def v034() -> ManagerTarget:
    return vllm_v034_manager()


def test_cached_tokens_is_the_hit_on_034_and_absent_on_033(v033: ManagerTarget,
                                                          v034: ManagerTarget) -> None:
    ex = run_program(v034, FULL, PROGRAM)
    assert ex.supports("get_num_cached_tokens")
    assert ex.step(ops.CachedTokens(1)) == 4  # r1's first block, computed by r0
    assert ex.step(ops.CachedTokens(0)) is None  # running: not asked
    old = run_program(v033, FULL, PROGRAM)
    assert not old.supports("get_num_cached_tokens")
    assert old.step(ops.CachedTokens(1)) is None


def test_common_prefix_is_zero_on_033_and_absent_on_034(v033: ManagerTarget,
                                                       v034: ManagerTarget) -> None:
    ex = run_program(v033, FULL, [*PROGRAM, ops.Schedule(0, 1)])
    assert ex.step(ops.CommonPrefix(0)) == [0]
    assert ex.step(ops.CommonPrefix(1)) is None  # waiting: not asked
    assert run_program(v034, FULL, [*PROGRAM, ops.Schedule(0, 1)]).step(
        ops.CommonPrefix(0)) is None


def test_stats_count_each_admission_and_start_over(v033: ManagerTarget) -> None:
    ex = run_program(v033, FULL_STATS, [*PROGRAM, ops.Schedule(1, 1)])
    assert ex.stats == {"reset": False, "requests": 1, "queries": 5, "hits": 4,
                        "preempted_requests": 0, "preempted_queries": 0, "preempted_hits": 0}
    ex.step(ops.EndStep())  # the manager reported exactly these, and starts over
    assert ex.stats["requests"] == 0
    ex.step(ops.Preempt(1))
    ex.step(ops.Schedule(1, 1))
    assert (ex.stats["preempted_requests"], ex.stats["requests"]) == (1, 0)


def test_a_broken_usage_is_caught_at_the_step_end() -> None:
    broken = next(b for b in ZOO if b.method == "usage")
    with pytest.raises(Violation) as info:
        run_program(broken.target(), FULL, PROGRAM)
    assert info.value.family is Family.FREE


def test_a_failed_load_evicts_exactly_the_blocks_from_its_start(v033: ManagerTarget) -> None:
    ex = run_program(v033, FULL, PROGRAM[:3])  # r0 ran one step: two keyed blocks, running
    first, second = ex._tables(0)[0][:2]
    assert ex.step(ops.Evict(0, 1)) == [second, *[b for b in ex._tables(0)[0][2:] if b]]
    keyed = {b.block_id for b in ex.pool.blocks if b.block_hash is not None}
    assert first in keyed and second not in keyed
    assert ex.step(ops.CachedTokens(0)) is None  # running: 0.33 has no such query anyway
