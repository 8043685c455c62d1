"""Device-level calls (``DEVICE_OPS`` in ``models.families.v0.operations``): one device's own
allocator called directly, as a custom swapper does (API.md 4 and 4.5).

``DeviceSwap`` is a swap in two halves: ``swap_out`` on the source allocator releases every
block's id (a cached id whose refcount reaches 0 becomes evictable there), then ``swap_in`` on
the destination gives each block an id of that device, in order: a full hashed block by content
(a hit or a miss, counted in that device's hit rate), any other block a fresh id. It must match
the model's ``Swap`` in ids, refcounts, content and cache hits, except that the device-aware
allocator's swap log does not see it. A swap-in that does not fit must raise
``NoFreeBlocksError`` before it takes any id (targets claiming atomicity; for others it is out
of contract: API.md lets it stop midway); the swapper then swaps the blocks back in on the
source, last released first, so they are held there again, as by a source-to-source swap.

The misuse variants (typed error, nothing changed; only for targets claiming typed errors):
a swap-in of blocks that still hold an id, a swap-out or free of another device's block, a
non-``None`` device given to a single-device allocator, ids an allocator does not own (physical
id, refcount, device), ``free_block_id`` of a free id, ``free`` of another allocator's block,
a swap-in of a block holding more tokens than the block size.

``DeviceFreeId`` (naive allocators of the vLLM generation) releases a block by its id and clears
the block: the model's ``Free``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.core.invariants import Family
from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.blocks import BlockRec
from models.families.v0.operations import Dev, Op

F = Family


class DeviceOut(Exception):
    """The program left the contract (the caller turns it into ``OutOfContract``)."""


def _other(dev: Dev) -> Dev:
    return Dev.CPU if dev is Dev.GPU else Dev.GPU


def _live(m: Model, h: int) -> BlockRec:
    if h < 0 or h not in m.blocks:
        raise DeviceOut(f"block handle {h} never existed")
    rec = m.blocks[h]
    if not rec.live:
        raise DeviceOut(f"block handle {h} was freed")
    return rec


def _distinct(m: Model, blocks: tuple[int, ...]) -> list[BlockRec]:
    if len(set(blocks)) != len(blocks):
        raise DeviceOut("the same block twice in one call")
    recs = [_live(m, h) for h in blocks]
    if len({r.id for r in recs}) != len(recs):
        raise DeviceOut("handles sharing an id in one device-level call")
    return recs


def fits(m: Model, op: ops.DeviceSwap) -> bool:
    """Whether the swap-in half finds enough free ids on ``op.dst``."""
    recs = [m.blocks[h] for h in op.blocks]
    return m.swap_cost(recs, op.dst) <= m.pools[op.dst].free


def device_misuse(m: Model, op: Op) -> str | None:
    """Why ``op`` (one of ``DEVICE_OPS``) is misuse, None if valid; raises :class:`DeviceOut`."""
    if isinstance(op, ops.DeviceSwap):
        if not m.caps.swap:
            raise DeviceOut("the target has no swap")
        if op.src is op.dst:
            raise DeviceOut("a swap by hand onto its own device")
        recs = _distinct(m, op.blocks)
        if any(r.device is not op.src for r in recs):
            raise DeviceOut(f"a block not on {op.src.value}")
        if not fits(m, op):
            if not m.caps.atomic:
                raise DeviceOut("a swap-in that does not fit may stop midway (no atomicity "
                                "claim)")
            if any(m.refcount[r.id] > 1 for r in recs if r.id is not None):
                raise DeviceOut("a refused swap of a shared id: its swap-out freed no id, so "
                                "the swapper may find none to put the block back")
        return None
    if isinstance(op, ops.DeviceSwapMisuse):
        if op.action not in ops.DEVICE_SWAP_MISUSES:
            raise DeviceOut(f"unknown device swap misuse {op.action!r}")
        recs = _distinct(m, op.blocks)
        if not recs or (op.action == "free_foreign" and len(recs) != 1):
            raise DeviceOut(f"{op.action} of {len(recs)} block(s)")
        if op.action == "swap_in_held":
            return f"swap_in on {op.device.value} of block(s) still holding an id"
        if op.action in ("swap_out_foreign", "free_foreign"):
            if any(r.device is op.device for r in recs):
                raise DeviceOut(f"{op.action}: a block of {op.device.value} itself")
            return f"{op.action} on {op.device.value} of another device's block"
        raise DeviceOut(f"{op.action}: not a swap misuse")  # not reached
    if isinstance(op, ops.DeviceMisuse):
        return _misuse(m, op)
    if isinstance(op, ops.DeviceFreeId):
        if m.pc:
            raise DeviceOut("free_block_id is the naive allocator's")
        if _live(m, op.block).device is not op.device:
            raise DeviceOut(f"block {op.block} is not on {op.device.value}")
        return None
    raise DeviceOut(f"not a device-level call: {op.kind}")


def _misuse(m: Model, op: ops.DeviceMisuse) -> str:
    if op.action not in ops.DEVICE_MISUSES:
        raise DeviceOut(f"unknown device misuse {op.action!r}")
    known = op.block_id is not None and m.pool_of(op.block_id) is not None
    if op.action in ("device_argument", "device_argument_immutable", "device_argument_chain"):
        return f"a device ({op.device.value}) given to a single-device allocator ({op.action})"
    if op.action == "physical_unknown":
        if op.block_id is None or op.block_id in m.pools[op.device].ids:
            raise DeviceOut("get_physical_block_id of an id the device owns")
        return f"get_physical_block_id({op.block_id}) on {op.device.value}, not its id"
    if op.action in ("refcount_unknown", "device_unknown"):
        if known or op.block_id is None:
            raise DeviceOut(f"{op.action} of an id a device owns")
        return f"{op.action}({op.block_id}): no device owns it"
    if op.action == "free_id_twice":
        pool = m.pools[op.device]
        if m.pc or op.block_id is None or op.block_id not in pool.ids \
                or m.refcount[op.block_id]:
            raise DeviceOut("free_block_id twice: a naive allocator's free id only")
        return f"free_block_id({op.block_id}) of a free id"
    if op.action == "free_foreign_allocator":
        return "free of a block another allocator made (and freed)"
    if op.action == "swap_in_oversized":
        return f"swap_in on {op.device.value} of a block of more tokens than the block size"
    raise DeviceOut(f"unknown device misuse {op.action!r}")


# --------------------------------------------------------------------------- steps


def _pairs(value: Any) -> list[list[int | None]] | None:
    try:
        return [[a, b] for a, b in value]
    except (TypeError, ValueError):
        return None


def device_swap(m: Model, op: ops.DeviceSwap) -> None:
    got = m.c.outcome.value
    shown = got if isinstance(got, dict) else {}
    swapped = shown.get("swapped")
    fit = fits(m, op)
    if swapped is not fit:
        m.c.flag(F.FREE, f"a swap-in to {op.dst.value} that {'fits' if fit else 'does not fit'}"
                 f" must {'succeed' if fit else 'raise NoFreeBlocksError'}",
                 expected=fit, observed=swapped, root_cause=True)
        if swapped:
            return  # the model cannot follow a swap it says is impossible
    recs = [m.blocks[h] for h in op.blocks]
    old = [r.id for r in recs]
    hints = {h: m.c.block_hint(h) for h in op.blocks}
    m.c.swapping = True
    log = dict(m.swap_log)  # the device-aware allocator's log does not see it
    if fit:
        m.swap(recs, op.src, op.dst, [hints[r.key] for r in recs])
    else:
        # All or nothing on the destination; back on the source, last released first.
        _destination_untouched(m, op)
        back = recs[::-1]
        m.swap(back, op.src, op.src, [hints[r.key] for r in back])
    m.swap_log = log
    want = [[i, r.id] for i, r in zip(old, recs, strict=True)]
    if _pairs(shown.get("pairs")) != want:
        m.c.flag(F.SWAP, "ids before and after the swap by hand", expected=want,
                 observed=shown.get("pairs"))
    for h in op.blocks:
        m.c.write(h, hints[h], None)


def _destination_untouched(m: Model, op: ops.DeviceSwap) -> None:
    """A refused swap-in leaves the destination as it was: its free count, and no block
    holding one of its ids (ATOMIC, the root cause of what the snapshot shows after)."""
    dst = m.pools[op.dst]
    shown = m.c.after.free.get(op.dst)
    if shown != dst.free:
        m.c.flag(F.ATOMIC, f"a refused swap-in changed the free count of {op.dst.value}",
                 expected=dst.free, observed=shown, root_cause=True)
    for h in op.blocks:
        got = m.c.after.blocks.get(h)
        if isinstance(got, int) and got in dst.ids:
            m.c.flag(F.ATOMIC, f"block {h} kept id {got} of {op.dst.value} after a refused "
                     "swap-in", observed=got, root_cause=True)


def device_free_id(m: Model, op: ops.DeviceFreeId) -> None:
    m.free(m.blocks[op.block])
    m.c.write(op.block, None, None)
    m.c.ended_blocks.append(op.block)


#: The valid operations' steps (``DeviceSwapMisuse`` and ``DeviceMisuse`` are always misuse,
#: judged before any step).
DEVICE_STEPS: dict[type[Op], Callable[[Model, Any], None]] = {
    ops.DeviceSwap: device_swap,
    ops.DeviceFreeId: device_free_id,
}

#: The family of a misuse accepted (or refused with the wrong error) by each operation.
DEVICE_MISUSE_FAMILY: dict[type[Op], Family] = {
    ops.DeviceSwap: F.SWAP,  # a valid swap by hand refused with a typed error
    ops.DeviceSwapMisuse: F.SWAP,
    ops.DeviceMisuse: F.ATOMIC,  # ids and arguments the allocator does not own
    ops.DeviceFreeId: F.LEAK,
}
