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
