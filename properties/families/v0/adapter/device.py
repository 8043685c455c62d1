"""Device-call plans: ``DEVICE_OPS`` call one device's own allocator,
``alloc._allocators[Device.X]`` (bound as ``gpu_allocator`` / ``cpu_allocator``): a detected
capability (both devices' allocators with ``swap_out`` and ``swap_in``, ``has_device_calls``);
``free_block_id`` (vLLM-generation naive allocators) and the factory ``create`` are detected on
their own (model: ``models/families/v0/ops/device.py``; ``DeviceSwap`` is in ``swap.py``).
"""

from __future__ import annotations

from typing import Any

from models.families.v0 import operations as ops
from models.families.v0.operations import Dev
from properties.core.calls import Attr, Call, ListOf, Lit, Name, Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan, block
from properties.families.v0.adapter.values import Unsupported


class DevicePlans(AdapterCore):
    """Plans of the per-device calls and their misuse."""

    @property
    def has_free_block_id(self) -> bool:
        return self.has_device_calls and callable(
            getattr(self._gpu_allocator(), "free_block_id", None))

    @property
    def has_create(self) -> bool:
        """The allocator's class has the factory ``create`` (another allocator can be made)."""
        return callable(getattr(type(self.alloc), "create", None))

    def _plan_device_swap_misuse(self, op: ops.DeviceSwapMisuse, _: Any) -> Plan:
        get, dev = self._on(op.device)
        blocks = ListOf(tuple(block(h) for h in op.blocks))
        call = {"swap_in_held": method(dev, "swap_in", blocks),
                "swap_out_foreign": method(dev, "swap_out", blocks),
                "free_foreign": method(dev, "free", block(op.blocks[0]))}.get(op.action)
        if call is None:
            raise Unsupported(f"unknown device swap misuse {op.action!r}")
        return Plan([get, Stmt(call)])

    def _plan_device_misuse(self, op: ops.DeviceMisuse, _: Any) -> Plan:
        get, dev = self._on(op.device)
        block_id = Lit(op.block_id)
        if op.action == "device_argument":
            return Plan([get, Stmt(method(dev, "allocate_mutable_block", Lit(None),
                                          device=self.device(op.device)))])
        if op.action in ("device_argument_immutable", "device_argument_chain"):
            full = Lit([0] * self.block_size)
            call = method(dev, "allocate_immutable_block", Lit(None), full,
                          device=self.device(op.device)) \
                if op.action == "device_argument_immutable" else \
                method(dev, "allocate_immutable_blocks", Lit(None), Lit([[0] * self.block_size]),
                       device=self.device(op.device))
            return Plan([get, Stmt(call)])
        if op.action == "physical_unknown":
            return Plan([get, Stmt(method(dev, "get_physical_block_id", block_id))])
        if op.action in ("refcount_unknown", "device_unknown"):
            if not self.has_block_info:
                raise Unsupported("get_block_refcount/get_block_device are not in this target")
            name = "get_block_refcount" if op.action == "refcount_unknown" \
                else "get_block_device"
            return Plan([Stmt(method("alloc", name, block_id))])
        if op.action == "free_id_twice":
            if not self.has_free_block_id:
                raise Unsupported("the target's device allocators have no free_block_id")
            return Plan([get, Stmt(method(dev, "free_block_id", block_id))])
        if op.action == "free_foreign_allocator":
            if not self.has_create:
                raise Unsupported("the target's class has no create")
            create = method(Attr(Name("alloc"), "__class__"), "create", Lit("naive"), Lit(1),
                            Lit(0), Lit(self.block_size))
            foreign = method("other_alloc", "allocate_mutable_block", Lit(None),
                             device=self.device(Dev.GPU))
            return Plan([Stmt(create, bind="other_alloc"), Stmt(foreign, bind="foreign_block"),
                         Stmt(method("other_alloc", "free", Name("foreign_block"))),
                         Stmt(method("alloc", "free", Name("foreign_block")))])
        if op.action == "swap_in_oversized":  # a full block of another allocator, 2x as big
            if not self.has_create:
                raise Unsupported("the target's class has no create")
            size = 2 * self.block_size
            create = method(Attr(Name("alloc"), "__class__"), "create", Lit("naive"), Lit(1),
                            Lit(0), Lit(size))
            big = method("other_alloc", "allocate_immutable_block", Lit(None), Lit([0] * size),
                         device=self.device(Dev.GPU))
            out = method(method(Attr(Name("other_alloc"), "_allocators"), "__getitem__",
                                self.device(Dev.GPU)), "swap_out", ListOf((Name("big_block"),)))
            return Plan([Stmt(create, bind="other_alloc"), Stmt(big, bind="big_block"),
                         Stmt(out), get,
                         Stmt(method(dev, "swap_in", ListOf((Name("big_block"),))))])
        raise Unsupported(f"unknown device misuse {op.action!r}")

    def _plan_device_free_id(self, op: ops.DeviceFreeId, _: Any) -> Plan:
        if not self.has_free_block_id:
            raise Unsupported("the target's device allocators have no free_block_id")
        get, dev = self._on(op.device)
        b = block(op.block)
        return Plan([get, Stmt(method(dev, "free_block_id", Attr(b, "block_id"))),
                     Stmt(Call(Name("setattr"), (b, Lit("block_id"), Lit(None))))])
