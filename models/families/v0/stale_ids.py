"""Stale id lists: ``MarkStaleIds`` marks the ids freed handles held (an engine that stamps a
sequence's ids after the sequence freed some of them).

Each handle names an id: the one it holds if live, else the one it held when it was freed (the
oracle records it at the ``Free``, in ``SeqState.freed_ids``). For a prefix-caching target, per
id (API.md 4.3):

- active (held by a live block, perhaps another handle's since) -> a normal mark: its tracker's
  last access time becomes ``now``;
- evictable (freed, still cached) -> ``evictor.update(id, now)``: its LRU rank moves to ``now``
  (same depth), so later evictions must follow the new order (LRU);
- free (hashless) -> misuse, ``ValueError``; a CPU id -> misuse, ``KeyError`` (the GPU
  allocator does not own it).

A mixed list (valid ids and one free id, in any order) is misuse as a whole: a typed error
and no id marked, not even those before the bad one (ATOMIC; a rank changed anyway shows in
later evictions as LRU). Targets without typed errors are never fed it. The naive allocator
ignores the call.
"""

from __future__ import annotations

from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.operations import Dev


class StaleOut(Exception):
    """The program left the contract (the caller turns it into ``OutOfContract``)."""


def stale_id(m: Model, handle: int) -> int:
    """The id ``handle`` names: held now, or held when it was freed."""
    if handle < 0 or handle not in m.blocks:
        raise StaleOut(f"block handle {handle} never existed")
    rec = m.blocks[handle]
    if rec.live and rec.id is not None:
        return rec.id
    freed = m.seqs.freed_ids.get(handle)
    if freed is None:
        raise StaleOut(f"block handle {handle} was never freed holding an id")
    return freed


def mark_stale_misuse(m: Model, op: ops.MarkStaleIds) -> str | None:
    """Why ``op`` is misuse (None if valid); raises :class:`StaleOut`."""
    ids = [stale_id(m, h) for h in op.blocks]
    if not m.pc:
        return None
    gpu = m.pools[Dev.GPU]
    for h, block_id in zip(op.blocks, ids, strict=True):
        if block_id not in gpu.ids:
            return f"mark_blocks_as_accessed of CPU id {block_id} (block {h})"
        if not gpu.is_active(block_id) and block_id not in gpu.evictor:
            return f"mark_blocks_as_accessed of free id {block_id} (block {h} held it)"
    return None


def mark_stale_ids(m: Model, op: ops.MarkStaleIds) -> None:
    if not m.pc:
        return
    gpu = m.pools[Dev.GPU]
    for block_id in (stale_id(m, h) for h in op.blocks):
        if gpu.is_active(block_id):
            gpu.accessed[block_id] = op.now
        else:
            gpu.evictor.touch(block_id, op.now)


def record_free(m: Model, handle: int, block_id: int | None) -> None:
    """After a successful ``Free`` of ``handle``: remember the id it held."""
    if block_id is not None:
        m.seqs.freed_ids[handle] = block_id
