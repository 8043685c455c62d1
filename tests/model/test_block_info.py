"""The refcount/device extension queries (``BlockInfo``): the model's answer against the
bundled allocator, a wrong refcount or device flagged with the right family, a freed handle
refused as misuse, and the capability detected (vLLM 0.8 has neither query)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from models.core.invariants import Invariant, Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, ErrorKind, Op
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0.adapter import Unsupported
from properties.families.v0.runner import Runner
from tests.model.judged import run_judged

F = Family


def _run(program: Sequence[Op], *, tamper: object = None) -> list[Any]:
    """Run ``program`` on the bundled allocator (block size 2, 6 GPU + 2 CPU blocks) under
    the oracle; with ``tamper``, the last step's value is replaced before it is judged."""
    return run_judged(program, DEFAULT_SPEC, (2, 6, 2), tamper=tamper)[0]


#: Handles 0, 1 (a chain), 2, 3 (a fork of it), then handle 0's id is held twice.
SHARED: list[Op] = [ops.AllocateImmutableChain(None, ((1, 2), (3, 4))), ops.Fork(1)]


def test_refcount_counts_live_holders_and_device_follows_swaps() -> None:
    values = _run([*SHARED, ops.BlockInfo((0, 3))])
    assert values[-1] == (None, [[2, "gpu"], [2, "gpu"]])
    values = _run([*SHARED, ops.Free(2), ops.Free(3), ops.BlockInfo((0, 1))])
    assert values[-1] == (None, [[1, "gpu"], [1, "gpu"]])
    values = _run([*SHARED, ops.Free(2), ops.Free(3), ops.Swap((0, 1), Dev.GPU, Dev.CPU),
                   ops.BlockInfo((1,))])
    assert values[-1] == (None, [[1, "cpu"]])


@pytest.mark.parametrize(("tamper", "family"), [
    ([[1, "gpu"], [2, "gpu"]], F.RC),
    ([[2, "cpu"], [2, "gpu"]], F.SWAP),
    ([[2, "gpu"]], F.RC),
])
def test_wrong_answer_is_flagged(tamper: object, family: Invariant) -> None:
    with pytest.raises(Violation) as err:
        _run([*SHARED, ops.BlockInfo((0, 3))], tamper=tamper)
    assert err.value.family is family


def test_query_of_a_freed_handle_is_refused() -> None:
    values = _run([ops.AllocateImmutable(None, (1, 2)), ops.AllocateMutable(None),
                   ops.Free(0), ops.BlockInfo((0,))])
    assert values[-1][0] is ErrorKind.MISUSE


def test_capability_is_detected() -> None:
    """The bundled allocator has both queries; vLLM 0.8 has neither, so the adapter has no
    plan for them (the machines then never ask)."""
    for spec, has in ((DEFAULT_SPEC, True), ("properties.upstream:vllm_v0_allocator",
    False)):
        target = load_target(spec)
        adapter = Runner(target, Config(2, 2, 2, target.caps)).adapter
        assert adapter.has_block_info is has
        if not has:
            with pytest.raises(Unsupported):
                adapter.plan(ops.BlockInfo((0,)), {})
