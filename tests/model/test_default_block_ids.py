"""Construction with the default block ids (docs/API.md §4: ``block_ids`` defaults to
``range(num_blocks)``): a ``Construct`` over ids ``0..n-1`` in order builds the allocator
without ``block_ids`` and reads back like the explicit construction; an allocator whose default
ids differ is flagged."""

from __future__ import annotations

from typing import Any

import pytest

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.invariants import Family
from prefixcache.naive_block import NaiveBlockAllocator
from prefixcache.prefix_caching_block import PrefixCachingBlockAllocator
from properties.core.calls import Call
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0.runner import Runner
from tests.model.judged import run_judged

VLLM = "properties.upstream:vllm_v0_allocator"

#: Three ids ``0..2`` on one device.
READ_OUT = {"total": [3], "free": [3], "all": [0, 1, 2], "physical": [0, 1, 2],
            "handed": [0, 1, 2], "free_after": [0]}


def _constructor_kwargs(op: ops.Construct) -> list[str]:
    """The keyword arguments the adapter passes the constructor for ``op``."""
    target = load_target(DEFAULT_SPEC)
    runner = Runner(target, Config(2, 4, 2, target.caps))
    runner.execute(op)
    call = runner.log[-1].stmts[0].expr
    assert isinstance(call, Call)
    return [name for name, _ in call.kwargs]


@pytest.mark.parametrize("spec", [DEFAULT_SPEC, VLLM])
@pytest.mark.parametrize("allocator", ops.CONSTRUCT_ALLOCATORS)
def test_default_ids_read_back_as_range(spec: str, allocator: str) -> None:
    values, _ = run_judged([ops.Construct(allocator, (0, 1, 2))], spec, (2, 4, 2))
    assert values == [(None, READ_OUT)]


def test_only_ids_in_order_from_zero_use_the_default() -> None:
    assert "block_ids" not in _constructor_kwargs(ops.Construct("prefix_caching", (0, 1, 2)))
    assert "block_ids" in _constructor_kwargs(ops.Construct("prefix_caching", (1, 0, 2)))
    assert "block_ids" in _constructor_kwargs(ops.Construct("prefix_caching", (0, 1, 3)))
    assert "block_ids" in _constructor_kwargs(
        ops.Construct("prefix_caching", (0, 1, 2), argument="num_blocks", bad=4))


@pytest.mark.parametrize("cls", [PrefixCachingBlockAllocator, NaiveBlockAllocator])
def test_wrong_default_ids_are_flagged(cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Default ids numbered from 1 instead of 0: the construction is flagged (reading back id
    0, which it lacks, fails; or the read-outs disagree with the model)."""
    init = cls.__init__

    def shifted(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("block_ids") is None:
            num_blocks = args[1] if cls is NaiveBlockAllocator else args[0]
            kwargs["block_ids"] = list(range(1, num_blocks + 1))
        init(self, *args, **kwargs)

    monkeypatch.setattr(cls, "__init__", shifted)
    allocator = "naive" if cls is NaiveBlockAllocator else "prefix_caching"
    with pytest.raises(Violation) as caught:
        run_judged([ops.Construct(allocator, (0, 1, 2))], DEFAULT_SPEC, (2, 4, 2))
    assert caught.value.family in (Family.ATOMIC, Family.LEAK, Family.FREE, Family.SWAP)
