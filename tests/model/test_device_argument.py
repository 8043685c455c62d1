"""The device argument of every allocation call of one device's allocator:
``allocate_mutable_block``, ``allocate_immutable_block`` and ``allocate_immutable_blocks`` take
no device (docs/API.md §4), so each given one is misuse; the bundled allocator refuses each with a
typed error whatever its type, and a check that stops refusing it is flagged."""

from __future__ import annotations

import pytest

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.operations import Dev, ErrorKind
from prefixcache import naive_block, prefix_caching_block
from properties.core.targets import DEFAULT_SPEC
from tests.model.judged import run_judged

ACTIONS = ("device_argument", "device_argument_immutable", "device_argument_chain")
TYPES = ("naive", "prefix_caching")


@pytest.mark.parametrize("allocator_type", TYPES)
@pytest.mark.parametrize("dev", [Dev.GPU, Dev.CPU])
@pytest.mark.parametrize("action", ACTIONS)
def test_a_device_argument_is_refused(allocator_type: str, dev: Dev, action: str) -> None:
    program = [ops.AllocateMutable(None, Dev.GPU), ops.DeviceMisuse(action, dev)]
    values, oracle = run_judged(program, DEFAULT_SPEC, (2, 4, 2), allocator_type)
    assert values[1][0] is ErrorKind.MISUSE
    assert oracle.is_misuse(program[1])


@pytest.mark.parametrize(("allocator_type", "module"),
                         [("naive", naive_block), ("prefix_caching", prefix_caching_block)])
def test_a_chain_allocation_that_ignores_the_device_is_flagged(
        monkeypatch: pytest.MonkeyPatch, allocator_type: str, module: object) -> None:
    """The chain allocation with its device check gone accepts a device: flagged."""
    program = [ops.AllocateMutable(None, Dev.GPU),
               ops.DeviceMisuse("device_argument_chain", Dev.GPU)]
    monkeypatch.setattr(module, "check_device_none", lambda device: None)
    with pytest.raises(Violation):
        run_judged(program, DEFAULT_SPEC, (2, 4, 2), allocator_type)
