"""Construction through the device-aware factory (``Construct(..., create=True)``):
``CpuGpuBlockAllocator.create(allocator_type, G, C, block_size)`` numbers GPU ids ``0..G-1``
and CPU ids ``G..G+C-1`` (docs/API.md §5) and reads back like the explicit construction of the same
ids; a factory that refuses or misnumbers a valid allocator type is flagged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from models.core.invariants import Invariant, Violation
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from models.families.v0.operations import Op
from models.families.v0.ops import construction
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from properties.core.targets import DEFAULT_SPEC
from tests.model.judged import run_judged

F = Family
VLLM = "properties.upstream:vllm_v0_allocator"

#: Three GPU ids and two CPU ids, as ``create`` numbers them.
CREATED = {"total": [3, 2], "free": [3, 2], "all": [0, 1, 2, 3, 4],
           "physical": [0, 1, 2, 0, 1], "handed": [0, 1, 2, 3, 4], "free_after": [0, 0]}


def _create(allocator: str, g: int = 3, c: int = 2) -> ops.Construct:
    return ops.Construct(allocator, tuple(range(g)), True, tuple(range(g, g + c)), create=True)


def _run(program: Sequence[Op], *, spec: str = DEFAULT_SPEC,
         tamper: object = None) -> list[tuple[Any, Any]]:
    return run_judged(program, spec, (2, 4, 2), tamper=tamper)[0]


@pytest.mark.parametrize("spec", [DEFAULT_SPEC, VLLM])
@pytest.mark.parametrize("allocator", ops.CONSTRUCT_ALLOCATORS)
def test_create_numbers_gpu_ids_first(spec: str, allocator: str) -> None:
    """Both allocator types, both targets: GPU ids ``0..2``, CPU ids ``3..4``; no CPU is fine."""
    values = _run([_create(allocator), _create(allocator, 2, 0)], spec=spec)
    assert values[0] == (None, CREATED)
    assert values[1] == (None, {"total": [2, 0], "free": [2, 0], "all": [0, 1],
                                "physical": [0, 1], "handed": [0, 1], "free_after": [0, 0]})


@pytest.mark.parametrize("op", [
    ops.Construct("naive", (0, 1), False, (), create=True),  # one device only
    ops.Construct("naive", (1, 2), True, (3,), create=True),  # GPU ids not from 0
    ops.Construct("naive", (0, 1), True, (3,), create=True),  # a gap before the CPU ids
    ops.Construct("naive", (1, 0), True, (2,), create=True),  # not in create's order
    ops.Construct("naive", (0,), True, (1,), "block_size", 0, create=True),  # malformed too
])
def test_other_numberings_are_out_of_contract(op: ops.Construct) -> None:
    with pytest.raises(construction.ConstructOut):
        construction.construct_misuse(op)


@pytest.mark.parametrize(("key", "wrong", "family"), [
    ("handed", [3, 4, 0, 1, 2], F.LEAK),  # CPU ids first
    ("all", [0, 1, 2, 3], F.LEAK),  # one id short
    ("total", [2, 3], F.FREE),  # the devices' sizes swapped
])
def test_misnumbered_read_outs_are_flagged(key: str, wrong: list[int], family: Invariant) -> None:
    with pytest.raises(Violation) as err:
        _run([_create("naive")], tamper={**CREATED, key: wrong})
    assert err.value.family is family


def test_a_factory_that_refuses_the_naive_type_is_flagged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``create`` losing its naive type: the program's own (prefix-caching) allocator is still
    built, and only ``Construct`` notices (the naive machines would be skipped as "the target
    cannot build a naive allocator")."""
    refused = "naive"
    original = CpuGpuBlockAllocator.create

    def create(allocator_type: str, *args: Any, **kwargs: Any) -> CpuGpuBlockAllocator:
        if allocator_type == refused:
            raise ValueError(f"unknown allocator type {allocator_type!r}")
        return original(allocator_type, *args, **kwargs)

    program = [_create(refused)]
    assert _run(program) == [(None, CREATED)]
    monkeypatch.setattr(CpuGpuBlockAllocator, "create", staticmethod(create))
    with pytest.raises(Violation):
        _run(program)


def test_json_round_trip() -> None:
    op = _create("prefix_caching")
    assert ops.op_from_json(ops.op_to_json(op)) == op
    assert ops.op_to_json(op)["create"] is True
