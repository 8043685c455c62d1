"""vLLM 0.33.0's own ``KVCacheManager`` runs on the bundled ``prefixcache.v1`` BlockPool.

The request machine (with the shadow KV memory) drives the release's manager, coordinators
and single-type managers unchanged; only the class the coordinator builds its pool from is the
bundled one (:func:`~properties.families.v1.request.target.vllm_v1_manager_on_bundled_pool`).
The only deviations allowed are the manager's own: the entries of the release's manager xfails
file, each of which must still reproduce here (so it is the manager's, not the pool's).
Skipped (by this directory's conftest) without torch or the wheel.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from models.families.v1 import request_ops as ops
from prefixcache.v1.core.block_pool import BlockPool
from properties.core.determinism import fixed_constants
from properties.families.v1.request.executor import run_program
from properties.families.v1.request.machine import bind
from properties.families.v1.request.target import (
    CONFIGS,
    FULL,
    ManagerConfig,
    ManagerTarget,
    vllm_v1_manager_on_bundled_pool,
)
from properties.families.v1.test_pool_level import matching_entry

XFAILS = Path(__file__).resolve().parents[3] / "conformance" / "vllm-0.33.manager.xfails.json"


@pytest.fixture(scope="module")
def target() -> ManagerTarget:
    return vllm_v1_manager_on_bundled_pool()


@pytest.fixture(scope="module")
def entries() -> list[dict[str, Any]]:
    data = json.loads(XFAILS.read_text(encoding="utf-8"))
    listed: list[dict[str, Any]] = data if isinstance(data, list) else data["entries"]
    return listed


def test_the_manager_builds_the_bundled_pool(target: ManagerTarget) -> None:
    manager = target.create(FULL)
    assert isinstance(manager.block_pool, BlockPool)
    # The shared release modules keep their own class for the release's target.
    assert target.mods.kv_cache_coordinator.BlockPool is not target.pool_cls


@pytest.mark.parametrize("config_name", sorted(CONFIGS))
def test_request_machine_on_bundled_pool(target: ManagerTarget, entries: list[dict[str, Any]],
                                         config_name: str) -> None:
    avoid = frozenset(f for e in entries for f in e.get("avoid", ()))
    machine = bind(target, CONFIGS[config_name], avoid=avoid)
    with fixed_constants():
        try:
            run_state_machine_as_test(machine, settings=settings(max_examples=40))
        except Violation as v:
            entry = matching_entry(v, entries)
            if entry is None:
                raise
            pytest.xfail(f"the manager's own {entry['id']}: {v.family.value} {v.message}")


def test_manager_xfails_are_the_managers(target: ManagerTarget,
                                         entries: list[dict[str, Any]]) -> None:
    """Each manager deviation of the release reproduces with the bundled pool underneath."""
    assert entries
    for entry in entries:
        program = [ops.from_json(r) for r in entry["program"]]
        with pytest.raises(Violation) as info:
            run_program(target, ManagerConfig.from_json(entry["config"]), program)
        assert matching_entry(info.value, [entry]) is entry, (entry["id"], str(info.value))
