"""Sequence-tracker calls the contract says a tracker must refuse (API.md section 10), each
with a typed error and nothing changed (targets with typed errors only):

- ``SeqLostBlocks``: the Aphrodite ``get_cached_computed_blocks_and_update`` of a sequence
  whose computed-id list (no gap yet) covers more blocks than the ids it is now given hold,
  less the last: the sequence lost blocks since the last call (an engine that re-allocated
  it without removing it from the tracker). The list must stay as it was.
- ``SeqCachedTokensUnsized``: the vLLM ``get_num_cached_tokens`` on a tracker built without a
  ``block_size`` (the Aphrodite construction): it has no block size to hash by.

Both are misuse by construction: a program that asks them in any other state left the
contract.
"""

from __future__ import annotations

from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.blocks import TableRec
from models.families.v0.operations import Dev, Op
from models.families.v0.table_misuse import is_damaged


class TrackerOut(Exception):
    """The program left the contract (the caller turns it into ``OutOfContract``)."""


def _running(m: Model, key: int) -> TableRec:
    t = m.tables.get(key)
    if t is None or not t.live or is_damaged(m, t):
        raise TrackerOut(f"table {key} is not a running sequence")
    if t.device is not Dev.GPU or t.window is not None or not t.blocks:
        raise TrackerOut(f"table {key}: the trackers ask about GPU tables without a window")
    return t


def tracker_misuse(m: Model, op: Op) -> str:
    """Why ``op`` is misuse; raises :class:`TrackerOut` unless it is."""
    if isinstance(op, ops.SeqCachedTokensUnsized):
        if not m.caps.vllm_api:
            raise TrackerOut("get_num_cached_tokens is vLLM-generation only")
        _running(m, op.table)
        return "get_num_cached_tokens on a tracker built without a block_size"
    if not isinstance(op, ops.SeqLostBlocks):
        raise TrackerOut(f"{op.kind} is not a tracker misuse")
    if not m.caps.aphrodite_api:
        raise TrackerOut("get_cached_computed_blocks_and_update is Aphrodite-generation only")
    _running(m, op.table)
    other = _running(m, op.other)
    e = m.seqs.entries.get(op.table) if m.seqs.started else None
    if e is None or e.computed is None:
        raise TrackerOut(f"sequence {op.table} is not in the computed tracker")
    if e.gap:
        raise TrackerOut("a list with a gap is returned as it is")
    if len(e.computed) <= len(other.blocks) - 1:
        raise TrackerOut(f"table {op.other} holds enough blocks for the list")
    return (f"sequence {op.table}'s computed list covers {len(e.computed)} blocks; table "
            f"{op.other} gives it {len(other.blocks)} ids (it lost blocks)")
