"""The v1 request level as a family of the core (``v1-manager``), what needs no wheel:
detection (the pool family and this one each claim only their own specs), the roles it takes,
the vocabulary's JSON form, a target without torch, and the reproducer each conformance entry
names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.families.v1 import request_ops as ops
from properties.core import family as families
from properties.core.roles import (
    Building,
    HandleShrinking,
    PoolShrinking,
    TokenInputs,
    Tolerating,
    Variants,
)
from properties.core.targets import TargetError, load_target
from properties.families.v1.family import FAMILY as POOL_FAMILY
from properties.families.v1.request import loader
from properties.families.v1.request.family import FAMILY, Step
from properties.families.v1.request.target import CONFIGS
from properties.families.v1.request.zoo import ZOO, spec_of

ROOT = Path(__file__).resolve().parents[2]
MANAGER_SPECS = ("properties.upstream:vllm_v1_manager", "properties.upstream:vllm_v033_manager",
                 "properties.upstream:vllm_v1_manager_on_bundled_pool",
                 "properties.families.v1.request.target:vllm_v034_manager",
                 *(spec_of(b) for b in ZOO))
POOL_SPECS = ("properties.upstream:vllm_v1_block_pool", "prefixcache.v1.core.block_pool:BlockPool")


def test_the_family_is_declared_and_detected_from_manager_specs() -> None:
    assert "v1-manager" in families.names()
    assert families.by_name("v1-manager") is FAMILY
    for spec in MANAGER_SPECS:
        assert FAMILY.accepts(spec) and not POOL_FAMILY.accepts(spec), spec
        assert families.select(spec) is FAMILY, spec
    for spec in POOL_SPECS:
        assert POOL_FAMILY.accepts(spec) and not FAMILY.accepts(spec), spec
    assert not FAMILY.accepts("properties.upstream:vllm_v0_allocator")
    assert not FAMILY.accepts("no.such.module:thing")


def test_the_family_takes_its_roles_whole_and_no_other() -> None:
    assert isinstance(FAMILY, HandleShrinking | PoolShrinking)
    assert not isinstance(FAMILY, Building | Tolerating | TokenInputs | Variants)
    assert [inv.value for inv in FAMILY.invariants] == [
        "CRASH", "TARGET", "ATOMIC", "CONTENT", "RC", "LEAK", "FREE", "CACHE", "COMPUTED",
        "TABLE"]


def test_operations_and_configs_round_trip_through_json() -> None:
    vocabulary = FAMILY.vocabulary
    program = [ops.Add((0, 1, 2), (1,), "s", 1), ops.Schedule(0, 3, 1), ops.EndStep(),
               ops.Preempt(0), ops.Abort(0), ops.ResetCache()]
    for op in program:
        assert vocabulary.is_op(op)
        assert vocabulary.op_from_json(json.loads(json.dumps(vocabulary.op_to_json(op)))) == op
    for config in CONFIGS.values():
        geometry = json.loads(json.dumps(vocabulary.geometry(config)))
        assert vocabulary.config(None, geometry) == config
    assert not vocabulary.is_op(object())


def test_handles_are_the_requests_an_add_made() -> None:
    assert FAMILY.made(Step(ops.Add((0,)), 3)) == {"request": (3,)}
    assert FAMILY.made(Step(ops.Add((0,)), None)) == {}  # no request was made
    assert FAMILY.made(Step(ops.Schedule(3, 1), None)) == {}
    smaller = [op for op, _ in FAMILY.smaller_ops(ops.Add((0,), (1, 2)), {"request": (0,)})]
    assert smaller == [ops.Add((0,), (1,))]
    assert [op for op, _ in FAMILY.smaller_ops(ops.Schedule(0, 4, 3), {})] == [
        ops.Schedule(0, 4, 0)]


def test_a_manager_without_torch_is_a_target_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "torch_available", lambda: False)
    with pytest.raises(TargetError, match=r"torch==2\.13\.0"):
        load_target("properties.upstream:vllm_v033_manager")
    with pytest.raises(TargetError, match="one allocator type"):
        FAMILY.load_target(None, families.TargetOptions(allocator_type="naive"))


@pytest.mark.parametrize("path", sorted((ROOT / "conformance").glob("*.manager.xfails.json")),
                         ids=lambda p: p.name)
def test_each_conformance_entry_has_its_reproducer(path: Path) -> None:
    """Each manager entry of a release's file is the core's format and has its plain script
    (``conformance/render_v1_manager_reproducers.py``)."""
    from properties.core.plugin import parse_expected

    raw = json.loads(path.read_text(encoding="utf-8"))
    assert parse_expected(raw, FAMILY.invariants)
    minor = path.name.removesuffix(".manager.xfails.json")
    for entry in raw:
        assert (path.parent / minor / f"{entry['id']}.py").is_file(), entry["id"]
