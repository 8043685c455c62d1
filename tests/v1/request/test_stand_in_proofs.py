"""The manager level's stand-ins against upstream's own code (compiled from the wheel where the
module cannot be imported whole): the dtype size the spec classes read, the request status
order the manager's ``is_finished`` relies on, and the prefix cache stats the manager aggregates
with ``log_stats``."""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from properties.families.v1 import upstream
from properties.families.v1.request import stand_ins


def _wheel(version: str) -> Path:
    wheel = upstream.cached_wheel(version)
    if wheel is None:
        pytest.skip(f"no vllm {version} wheel cached: run `{upstream.FETCH_COMMAND} "
                    f"--version {version}`")
    return wheel


def _tree(wheel: Path, member: str) -> ast.Module:
    with zipfile.ZipFile(wheel) as archive:
        return ast.parse(archive.read(member).decode("utf-8"))


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
def test_dtype_size_is_upstreams(version: str) -> None:
    import torch

    tree = _tree(_wheel(version), "vllm/utils/torch_utils.py")
    node = next(n for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name == "get_dtype_size")
    namespace: dict[str, Any] = {"torch": torch}
    exec(compile(ast.Module([node], []), "torch_utils.py", "exec"), namespace)
    module = ModuleType("torch_utils")
    stand_ins._build_torch_utils(module)
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8,
                  torch.uint8, torch.int32, torch.bool):
        assert module.get_dtype_size(dtype) == namespace["get_dtype_size"](dtype)


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
def test_request_status_order_is_upstreams(version: str) -> None:
    """The stand-in's statuses are upstream's first ones, in order: the unfinished ones and the
    first finished one (anything after ``PREEMPTED`` is finished, upstream and here)."""
    tree = _tree(_wheel(version), "vllm/v1/request.py")
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RequestStatus")
    names = [t.id for s in cls.body if isinstance(s, ast.Assign) for t in s.targets
             if isinstance(t, ast.Name)]
    ours = [s.name for s in stand_ins.RequestStatus]
    assert names[:len(ours)] == ours
    assert ours.index("PREEMPTED") == names.index("PREEMPTED") == len(ours) - 2


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
def test_prefix_cache_stats_aggregate_as_upstreams(version: str) -> None:
    """The stats stand-in (``log_stats``) counts what upstream's ``PrefixCacheStats`` counts
    for the same records (seeded), field by field; its fields are upstream's, connector hits
    by source aside (left empty, as upstream without a connector)."""
    import dataclasses
    import random

    tree = _tree(_wheel(version), "vllm/v1/metrics/stats.py")
    nodes = [n for n in tree.body if isinstance(n, ast.ClassDef)
             and n.name in ("BaseCacheStats", "PrefixCacheStats")]
    namespace: dict[str, Any] = {"dataclass": dataclasses.dataclass,
                                 "field": dataclasses.field, "CacheHitSource": object}
    exec(compile(ast.Module(nodes, []), "stats.py", "exec"), namespace)
    upstream_cls = namespace["PrefixCacheStats"]
    assert [f.name for f in dataclasses.fields(upstream_cls)] == [
        f.name for f in dataclasses.fields(stand_ins.PrefixCacheStats)]
    rng = random.Random(7)
    theirs, ours = upstream_cls(), stand_ins.PrefixCacheStats()
    for _ in range(200):
        tokens = rng.randint(1, 40)
        args = (tokens, rng.randint(0, tokens - 1), rng.random() < 0.3)
        theirs.record(*args)
        ours.record(*args)
        assert dataclasses.asdict(theirs) == dataclasses.asdict(ours)


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
def test_manager_event_records_carry_upstreams_fields(version: str) -> None:
    """The event records the manager's ``take_events`` returns (a store, a removal and a
    reset, in a full and a sliding-window group) hold only fields upstream's structs declare,
    the ones the manager annotates included, and every field they lack has a default there:
    upstream's msgspec structs would carry the same values."""
    from models.families.v1 import request_ops as ops
    from properties.families.v1.request.executor import RequestExecutor
    from properties.families.v1.request.target import ManagerConfig, ManagerTarget

    wheel = _wheel(version)
    declared: dict[str, dict[str, bool]] = {}  # class -> field -> has a default
    for node in _tree(wheel, "vllm/distributed/kv_events.py").body:
        if isinstance(node, ast.ClassDef) and node.name in (
                "BlockStored", "BlockRemoved", "AllBlocksCleared"):
            declared[node.name] = {
                s.target.id: s.value is not None for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    from properties.families.v1.request.loader import load_manager

    config = ManagerConfig(num_blocks=12, groups=(("full", 4), ("window", 4, 6)),
                           hash_block_size=4, events=True)
    ex = RequestExecutor(ManagerTarget("vllm", load_manager(version=version)), config)
    events: list[Any] = []
    for op in (ops.Add((0, 1, 2, 0, 1, 2, 0, 1, 2), (1,)), ops.Schedule(0, 9), ops.EndStep(),
               ops.Evict(0, 1)):
        ex.step(op)
    events += ex.mgr.take_events()
    ex.step(ops.Abort(0))
    ex.step(ops.ResetCache())
    events += ex.mgr.take_events()
    seen = set()
    for event in events:
        name, fields = type(event).__name__, set(vars(event))
        seen.add(name)
        assert fields <= set(declared[name]), (name, fields - set(declared[name]))
        assert all(default for f, default in declared[name].items() if f not in fields)
        if name == "BlockStored":
            assert {"kv_cache_spec_kind", "kv_cache_spec_sliding_window"} <= fields
    assert seen == {"BlockStored", "BlockRemoved", "AllBlocksCleared"}, seen
