"""The v1 family object and what it shares with the core: the step watchdog (a hanging pool
call is a TARGET violation, the process lives on), crashes naming the call, the core target
wrapping the pool, the structural oracle, the program listing and the fuzzers' generator (the pool
machine)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest

from fuzz.core.machine_harness import machine_level, machine_levels
from fuzz.core.regress import program_listing
from models.core.invariants import Violation
from models.families.v1 import ops
from models.families.v1.invariants import Family
from models.families.v1.pool_model import Observed, PoolConfig
from prefixcache.v1.core.block_pool import BlockPool
from properties.core.family import TargetOptions
from properties.core.roles import Building, HandleShrinking, PoolShrinking, Tolerating
from properties.core.targets import TargetError
from properties.core.watchdog import Hang
from properties.families.v1.executor import run_program
from properties.families.v1.family import FAMILY, PoolJudge, pool_of
from properties.families.v1.targets import PoolTarget

CONFIG = PoolConfig(num_blocks=6, hash_block_size=2, group_block_sizes=(2,))


class HangingPool(BlockPool):
    def get_new_blocks(self, num_blocks: int) -> Any:
        if num_blocks == 2:
            time.sleep(30)
        return super().get_new_blocks(num_blocks)


class CrashingPool(BlockPool):
    def touch(self, blocks: Any) -> None:
        raise KeyError("boom")


def bundled(cls: type[BlockPool], step_timeout: float | None = None) -> PoolTarget:
    target = pool_of(FAMILY.load_target(None, TargetOptions(step_timeout=step_timeout)))
    return replace(target, pool_cls=cls)


def test_the_core_target_wraps_the_pool_target() -> None:
    target = FAMILY.load_target(None, TargetOptions(step_timeout=3))
    assert target.family == "v1" and target.spec == FAMILY.default_spec
    assert target.allocator_type == "block_pool" and target.step_timeout == 3.0
    assert target.describe().startswith("prefixcache ") and "v1 BlockPool" in target.describe()
    assert pool_of(target).step_timeout == 3.0
    assert isinstance(target.create(CONFIG), BlockPool)
    with pytest.raises(TargetError, match="no features to disable"):
        FAMILY.load_target(None, TargetOptions(disable=("lru",)))
    with pytest.raises(TargetError, match="one allocator type"):
        FAMILY.load_target(None, TargetOptions(allocator_type="naive"))


def test_a_hanging_call_is_a_target_violation_with_its_program() -> None:
    started = time.monotonic()
    with pytest.raises(Violation) as info:
        run_program(bundled(HangingPool, step_timeout=0.3), CONFIG,
                    [ops.GetNew(1), ops.GetNew(2)])
    assert time.monotonic() - started < 10
    assert info.value.family is Family.TARGET and "exceeded 0.3 s" in info.value.message
    assert isinstance(info.value, Hang)  # told apart from a wrong answer
    assert info.value.step == 1
    program = [n.removeprefix("program: ") for n in info.value.__notes__
               if n.startswith("program: ")]
    assert program and json.loads(program[0]) == ops.program_json([ops.GetNew(1), ops.GetNew(2)])


def test_a_crash_names_the_call() -> None:
    with pytest.raises(Violation) as info:
        run_program(bundled(CrashingPool), CONFIG, [ops.GetNew(1), ops.Touch((1,))])
    assert info.value.family is Family.CRASH
    assert info.value.message.startswith("touch raised KeyError")


def test_the_judge_logs_steps_and_checks_snapshots() -> None:
    target = FAMILY.load_target()
    judge = FAMILY.judge(target, CONFIG)
    for op in (ops.Req(tokens=(1, 2, 3, 4)), ops.GetNew(2), ops.CacheFull(0, (1, 2), 0, 2, 0)):
        judge.step(op)
    assert [s.op for s in judge.log][1:] == [ops.GetNew(2), ops.CacheFull(0, (1, 2), 0, 2, 0)]
    with pytest.raises(FAMILY.out_of_contract):
        judge.step(ops.Lookup(3, 0, (0,)))
    bad = Observed(ref={1: 1, 2: 0}, free=(1, 2), primary={}, num_free=2, usage=0.0)
    with pytest.raises(Violation, match="free queue has references"):
        PoolJudge._check(judge, bad)
    short = Observed(ref={1: 0, 2: 0}, free=(1, 2), primary={}, num_free=1, usage=0.0)
    with pytest.raises(Violation, match="counts the free queue"):
        PoolJudge._check(judge, short)


def test_the_family_takes_the_roles_it_fills_and_no_other() -> None:
    assert isinstance(FAMILY, Building) and isinstance(FAMILY, PoolShrinking)
    assert not isinstance(FAMILY, HandleShrinking | Tolerating)


def test_json_round_trip_and_listing() -> None:
    program = [ops.Req(tokens=(0, 1), lora=1), ops.GetNew(1), ops.TakeEvents()]
    vocabulary = FAMILY.vocabulary
    assert [vocabulary.op_from_json(vocabulary.op_to_json(op)) for op in program] == program
    geometry = vocabulary.geometry(CONFIG)
    assert vocabulary.config(None, geometry) == CONFIG
    listing = program_listing(FAMILY, geometry, program, [0, [1]])
    assert listing.splitlines()[2] == "  1. GetNew(n=1)  -> [1]"
    probe = ops.Probe("double_free", 3)
    assert vocabulary.op_from_json(vocabulary.op_to_json(probe)) == probe


def test_the_fuzzers_take_the_pool_machine() -> None:
    """The fuzzers draw v1 programs with the pool machine (one generator)."""
    assert list(machine_levels(FAMILY)) == ["pool_level"]
    with pytest.raises(ValueError, match="known: pool_level"):
        machine_level(FAMILY, "block_level")


def test_an_unfetchable_release_is_a_clear_error_tried_once(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    from properties.core.sources import UpstreamSourceMissing
    from properties.families.v1 import targets, upstream

    calls: list[str] = []

    def fetch(version: str) -> None:
        calls.append(version)
        raise UpstreamSourceMissing("`pip download` failed with exit code 1")

    monkeypatch.setattr(upstream, "cached_wheel", lambda version="0.34.0": None)
    monkeypatch.setattr(upstream, "fetch", fetch)
    monkeypatch.delenv(upstream.SOURCE_ENV, raising=False)
    monkeypatch.setattr(targets, "_FETCH_FAILED", {})
    for _ in range(2):
        with pytest.raises(UpstreamSourceMissing, match="is the package index reachable") as info:
            targets.vllm_v1_block_pool()
        assert "python -m properties.upstream fetch vllm-v1 --version 0.34.0" in str(info.value)
    assert calls == ["0.34.0"]
