"""The manager loader: real manager, coordinators, single-type managers and specs from the
wheel, engine packages stubbed, isolated from ``sys.modules`` and from block-level loads."""

from __future__ import annotations

import sys

import pytest

from properties.families.v1 import upstream
from properties.families.v1.request import loader
from properties.families.v1.request.stand_ins import ManagerRequest, RequestStatus
from properties.families.v1.request.target import (
    FULL,
    HYBRID,
    vllm_v033_manager,
    vllm_v1_manager,
)


def _vllm_modules() -> dict[str, object]:
    return {n: m for n, m in sys.modules.items() if n == "vllm" or n.startswith("vllm.")}


def test_loads_the_real_manager_isolated() -> None:
    before = _vllm_modules()  # a v0 load may have registered some
    fresh = loader.load_manager(version="0.33.0", patches=(
        ("v1.core.kv_cache_manager", "def usage(self)", "def usage(self, _fresh=0)"),))
    assert _vllm_modules() == before
    assert "_fresh" in fresh.kv_cache_manager.KVCacheManager.usage.fget.__code__.co_varnames
    mods = loader.load_manager(version="0.33.0")
    assert loader.load_manager(version="0.33.0") is mods and mods is not fresh
    assert mods.version == "0.33.0"
    for real in ("v1.core.kv_cache_manager", "v1.kv_cache_interface", "v1.core.block_pool"):
        assert f"vllm.{real}" not in mods.stubbed
    assert "vllm.v1.request" in mods.stubbed
    # A separate execution of block_pool.py: the block level's pool class is another object.
    block = upstream.load_vllm_v1(version="0.33.0")
    assert block.block_pool.BlockPool is not mods.block_pool.BlockPool
    registry = mods.single_type.KVCacheSpecRegistry
    spec = vllm_v033_manager()._spec(("window", 4, 6))
    assert registry.get_manager_class(spec) is mods.single_type.SlidingWindowManager


def test_configs_build_the_upstream_coordinators() -> None:
    target = vllm_v1_manager()
    unitary = target.create(FULL)
    hybrid = target.create(HYBRID)
    assert type(unitary.coordinator).__name__ == "UnitaryKVCacheCoordinator"
    assert type(hybrid.coordinator).__name__ == "HybridKVCacheCoordinator"
    assert [type(m).__name__ for m in hybrid.coordinator.single_type_managers] == [
        "FullAttentionManager", "SlidingWindowManager"]
    assert hybrid.block_pool.get_num_free_blocks() == HYBRID.num_blocks - 1  # null block


def test_a_prefix_hit_across_requests() -> None:
    target = vllm_v1_manager()
    mgr = target.create(FULL)
    hasher = target.hasher(FULL.hash_block_size)
    a = ManagerRequest("a", list(range(10)), num_prompt_tokens=10, hasher=hasher)
    a.rehash()
    blocks, hit, _ = mgr.get_computed_blocks(a)
    assert hit == 0
    assert mgr.allocate_slots(a, 10, hit, blocks) is not None
    a.num_computed_tokens, a.status = 10, RequestStatus.RUNNING
    b = ManagerRequest("b", list(range(9)), num_prompt_tokens=9, hasher=hasher)
    b.rehash()
    blocks, hit, _ = mgr.get_computed_blocks(b)
    assert hit == 8
    assert blocks.get_block_ids() == (mgr.get_block_ids("a")[0][:2],)


def test_torch_missing_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "torch_available", lambda: False)
    with pytest.raises(loader.TorchMissing, match=r"torch==2\.13\.0"):
        loader.load_manager(version="0.33.0")
