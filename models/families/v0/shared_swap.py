"""A ``Swap`` of handles that share an id (a block and its fork) in one call.

Targets that claim atomicity (the bundled family: the swap is checked first, then done at once)
move each source id once: every handle of one source id lands on the same destination id,
whose refcount is the number of those handles, the mapping and the swap log hold the pair once,
and the swap-in needs (and queries the cache for) one destination id per distinct source id.
For other targets such a swap is out of contract (``models.families.v0.contract``): API.md 4.5
re-allocates each block on its own, so a shared partial block gets one id per handle and the ``{src:
dst}`` mapping keeps only the last pair (vLLM 0.8 does exactly that; the engine swaps one sequence
per call and never meets it).
"""

from __future__ import annotations

from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.block_ops import check_mapping
from models.families.v0.block_ops import swap as per_block_swap
from models.families.v0.blocks import BlockRec


def keeps_shared_ids(m: Model) -> bool:
    """Whether the target must keep handles of one source id on one destination id."""
    return m.caps.atomic


def representatives(recs: list[BlockRec]) -> list[BlockRec]:
    """The first record of each distinct id, in order."""
    first: dict[int | None, BlockRec] = {}
    for rec in recs:
        first.setdefault(rec.id, rec)
    return list(first.values())


def swap_cost(m: Model, op: ops.Swap) -> int:
    """Fresh destination ids the swap needs (one per distinct source id when shared ids are
    kept, else one per block as API.md re-allocates them)."""
    recs = [m.blocks[h] for h in op.blocks]
    return m.swap_cost(representatives(recs) if keeps_shared_ids(m) else recs, op.dst)


def swap(m: Model, op: ops.Swap) -> None:
    """The ``Swap`` step: per block unless ids repeat (then the target keeps them shared):
    the extra holders of each source id are released first, the representatives swapped as
    one swap, and every other holder given its representative's new id."""
    recs = [m.blocks[h] for h in op.blocks]
    firsts = representatives(recs)
    if len(firsts) == len(recs) or not keeps_shared_ids(m):
        per_block_swap(m, op)
        return
    m.c.swapping = True
    hints = {h: m.c.block_hint(h) for h in op.blocks}
    first_of = {rec.id: rec for rec in firsts}  # source id -> its representative
    others = [rec for rec in recs if first_of[rec.id] is not rec]
    for rec in others:
        if rec.id is not None:
            m.pools[op.src].release(rec.id)  # never the last holder: its representative holds
    sources = [rec.id for rec in others]
    mapping = m.swap(firsts, op.src, op.dst, [hints[rec.key] for rec in firsts])
    for rec, source in zip(others, sources, strict=True):
        rec.id = first_of[source].id
        rec.device = op.dst
        if rec.id is not None:
            m.pools[op.dst].incref(rec.id)
    check_mapping(m, mapping)
    for h in op.blocks:
        m.c.write(h, hints[h], None)
