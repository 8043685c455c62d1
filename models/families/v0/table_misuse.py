"""A table whose block was freed behind its back: ``TableFreeBlock`` and what follows it.

``TableFreeBlock(t, i)`` is ``alloc.free(t.blocks[i])`` for a table without a sliding window,
a legal free of a held block (as ``Free``: one reference dropped; at zero a cached id becomes
evictable, any other hashless).
The table keeps the object, which now shows no id (``blocks[i].block_id is None``); the table
is *damaged* from then on. Contract for a damaged table (targets with typed errors; the others
are never fed the misuse):

- Refused with a typed error, nothing changed (ATOMIC; every other block keeps its reference,
  so LEAK/RC keep judging them): ``free()`` (family LEAK), ``fork()`` (RC), an append whose
  tokens go into the freed block of a GPU table (TABLE), and freeing the freed block again (LEAK).
- Still allowed: ``TableFreeBlock`` of any block it still holds. That is how the engine gives
  the other blocks back; then it can only drop the table object.
- Everything else (appends that only write after the freed block, growing, swapping, marking,
  queries, the trackers) is left open: out of contract.

The freed object goes back to the target's block pool, which may hand it out again once a block
object is made (``BlockStore.reusable``): from then on the table holds an object that may be
another block's, and only ``TableFreeBlock`` of its live blocks stays in contract. A damaged
table is no longer a running sequence: it leaves ``live_tables`` (snapshots stop judging its
ids, which a reused object would change), its own step judges the ids it shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.families.v0.ops import common

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model
    from models.families.v0.blocks import TableRec


def engine_left_open(m: Model, t: TableRec, kind: str) -> None:
    """An engine-side question (``kind``, ``models.families.v0.ops.trackers``) about a damaged
    table is left open: raises :class:`~models.families.v0.ops.base.Out` if ``t`` is damaged
    (the other operations judge damage themselves: ``TableFreeBlock`` and the table
    operations in ``models.families.v0.ops.tables``, the tracker misuse in
    ``ops.tracker_misuse``, ``TableSwap`` in ``ops.swap``)."""
    common.left_open_if_damaged(m, t, kind)
