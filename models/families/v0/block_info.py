"""Semantics of the block queries (``BLOCK_QUERY_OPS`` in ``models.families.v0.operations``).

``BlockInfo``: for each live handle, ``get_block_refcount`` is the number of live holders of
its id (the model's refcount, which counts handles and the null block) and
``get_block_device`` the device the block lives on. A freed handle holds no id, so asking
about it is misuse (contract in ``models.families.v0.contract``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.core.invariants import Family
from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.operations import Op

F = Family


def block_info(m: Model, op: ops.BlockInfo) -> None:
    got = m.c.outcome.value
    if not isinstance(got, list) or len(got) != len(op.blocks):
        m.c.flag(F.RC, "get_block_refcount/get_block_device: one answer per block",
                 expected=len(op.blocks), observed=got)
        return
    for h, answer in zip(op.blocks, got, strict=True):
        rec = m.blocks[h]
        block_id = rec.id
        if block_id is None:  # not reached: the contract requires live handles
            continue
        refcount, device = answer
        want = m.refcount.get(block_id, 0)
        if refcount != want:
            m.c.flag(F.RC, f"get_block_refcount({block_id}) of block {h}", expected=want,
                     observed=refcount)
        if device != rec.device.value:
            m.c.flag(F.SWAP, f"get_block_device({block_id}) of block {h}",
                     expected=rec.device.value, observed=device)


BLOCK_QUERY_STEPS: dict[type[Op], Callable[[Model, Any], None]] = {
    ops.BlockInfo: block_info,
}
