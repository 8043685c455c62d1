"""Device-level calls: one device's own allocator called directly, as a custom swapper does
(docs/API.md §4 and §4.5). ``DeviceSwap``, a swap in two halves, is with the other swaps
(``models.families.v0.ops.swap``).

The misuse variants (typed error, nothing changed; only for targets claiming typed errors):
a swap-in of blocks that still hold an id, a swap-out or free of another device's block, a
non-``None`` device given to a single-device allocator, ids an allocator does not own (physical
id, refcount, device), ``free_block_id`` of a free id, ``free`` of another allocator's block,
a swap-in of a block holding more tokens than the block size.

``DeviceFreeId`` (naive allocators of the vLLM generation) releases a block by its id and clears
the block: the model's ``Free``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Invariant
from models.families.v0.invariants import Family
from models.families.v0.ops import common
from models.families.v0.ops.base import Op, Out
from models.families.v0.ops.values import Dev

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model

#: What :class:`DeviceSwapMisuse` tries on ``device``'s allocator.
DEVICE_SWAP_MISUSES: tuple[str, ...] = ("swap_in_held", "swap_out_foreign", "free_foreign")

#: What :class:`DeviceMisuse` tries.
DEVICE_MISUSES: tuple[str, ...] = ("device_argument", "physical_unknown", "refcount_unknown",
                                   "device_unknown", "free_id_twice", "free_foreign_allocator",
                                   "swap_in_oversized",
                                   # the device argument of the other two
                                   # allocation calls
                                   "device_argument_immutable", "device_argument_chain")


@dataclass(frozen=True, slots=True)
class DeviceSwapMisuse(Op):
    """On ``device``'s allocator: ``swap_in(blocks)`` of blocks that still hold an id
    (``"swap_in_held"``), ``swap_out(blocks)`` of another device's blocks
    (``"swap_out_foreign"``) or ``free(blocks[0])`` of another device's block
    (``"free_foreign"``). Always misuse."""

    kind: ClassVar[str] = "device_swap_misuse"
    misuse_family: ClassVar[Invariant] = Family.SWAP
    action: str
    blocks: tuple[int, ...]
    device: Dev

    def misuse(self, m: Model) -> str | None:
        if self.action not in DEVICE_SWAP_MISUSES:
            raise Out(f"unknown device swap misuse {self.action!r}")
        recs = common.distinct(m, self.blocks)
        if not recs or (self.action == "free_foreign" and len(recs) != 1):
            raise Out(f"{self.action} of {len(recs)} block(s)")
        if self.action == "swap_in_held":
            return f"swap_in on {self.device.value} of block(s) still holding an id"
        if any(r.device is self.device for r in recs):  # swap_out_foreign, free_foreign
            raise Out(f"{self.action}: a block of {self.device.value} itself")
        return f"{self.action} on {self.device.value} of another device's block"


@dataclass(frozen=True, slots=True)
class DeviceMisuse(Op):
    """A call that names what the allocator does not own: on ``device``'s allocator,
    ``allocate_mutable_block(None, device=Device.<device>)`` (``"device_argument"``: its
    methods take no device), ``get_physical_block_id(block_id)`` of an id it does not own
    (``"physical_unknown"``), ``free_block_id(block_id)`` of a free id (``"free_id_twice"``,
    naive allocators of the vLLM generation); on the device-aware allocator
    ``get_block_refcount(block_id)`` / ``get_block_device(block_id)`` of an id no device owns
    (``"refcount_unknown"``, ``"device_unknown"``) and ``free`` of a block another allocator
    made and freed (``"free_foreign_allocator"``); on ``device``'s allocator, ``swap_in`` of a
    full block of twice the block size, swapped out of another allocator
    (``"swap_in_oversized"``); ``"device_argument_immutable"`` / ``"device_argument_chain"``:
    as ``"device_argument"`` with ``allocate_immutable_block(None, [0] * block_size, device=..)``
    / ``allocate_immutable_blocks(None, [[0] * block_size], device=..)``. Always misuse."""

    kind: ClassVar[str] = "device_misuse"
    misuse_family: ClassVar[Invariant] = Family.ATOMIC  # ids, arguments it does not own
    action: str
    device: Dev = Dev.GPU
    block_id: int | None = None

    def misuse(self, m: Model) -> str | None:
        action, block_id = self.action, self.block_id
        if action not in DEVICE_MISUSES:
            raise Out(f"unknown device misuse {action!r}")
        known = block_id is not None and m.pool_of(block_id) is not None
        if action in ("device_argument", "device_argument_immutable", "device_argument_chain"):
            return (f"a device ({self.device.value}) given to a single-device allocator "
                    f"({action})")
        if action == "physical_unknown":
            if block_id is None or block_id in m.pools[self.device].ids:
                raise Out("get_physical_block_id of an id the device owns")
            return f"get_physical_block_id({block_id}) on {self.device.value}, not its id"
        if action in ("refcount_unknown", "device_unknown"):
            if known or block_id is None:
                raise Out(f"{action} of an id a device owns")
            return f"{action}({block_id}): no device owns it"
        if action == "free_id_twice":
            pool = m.pools[self.device]
            if m.pc or block_id is None or block_id not in pool.ids or m.refcount[block_id]:
                raise Out("free_block_id twice: a naive allocator's free id only")
            return f"free_block_id({block_id}) of a free id"
        if action == "free_foreign_allocator":
            return "free of a block another allocator made (and freed)"
        return f"swap_in on {self.device.value} of a block of more tokens than the block size"


@dataclass(frozen=True, slots=True)
class DeviceFreeId(Op):
    """vLLM ``free_block_id(block.block_id)`` on ``device``'s allocator (a naive one; the
    block lives there), then ``block.block_id = None``: the block released by id, as
    ``free(block, keep_block_object=True)``."""

    kind: ClassVar[str] = "device_free_id"
    misuse_family: ClassVar[Invariant] = Family.LEAK
    block: int
    device: Dev = Dev.GPU

    def misuse(self, m: Model) -> str | None:
        if m.pc:
            raise Out("free_block_id is the naive allocator's")
        if common.live(m, self.block).device is not self.device:
            raise Out(f"block {self.block} is not on {self.device.value}")
        return None

    def step(self, m: Model) -> None:
        m.free(m.blocks[self.block])
        m.c.write(self.block, None, None)
        m.c.ended_blocks.append(self.block)
