"""Read-outs a block manager takes besides the allocator calls: a table's slot counters, the
id space, and the swap log. All are predicted exactly:

- ``num_full_slots`` is every token the table was given (a sliding window or ``free`` does not
  lower it); ``get_unseen_token_ids(seq)`` is ``seq[num_full_slots:]``; the worst-case
  ``get_num_blocks_touched_by_append_slots(unseen, la)`` is ``1 + cdiv(len + la - first, bs)``
  with ``first = bs - num_full_slots % bs`` (TABLE for the first two, FREE for the count).
- A device's physical ids are its absolute ids' positions in its sorted id set (GPU ids
  ``0..G-1`` map to themselves, CPU ids ``G..G+C-1`` to ``0..C-1``): a bijection onto
  ``0..n-1`` (SWAP: the engine's swap copies use them); ``get_num_total_blocks`` is the
  device's size (FREE) and ``all_block_ids`` every id of both devices (LEAK).
- The null block (once taken) forwards every read to the empty mutable GPU block it wraps:
  its id is the model's null id (LEAK), it holds no tokens, ``block_size`` empty slots, is not
  full, has no predecessor, no content hash and no extra hash (TABLE); it is never computed
  and a ``last_accessed`` written through it reads back (LRU); ``free`` of it is ignored (the
  snapshot's free counts check that).
- ``get_num_required_blocks(seq, bs, la)`` is ``cdiv(len(seq) + la, bs)`` (FREE).
- ``get_and_reset_swaps()`` returns the ``{src: dst}`` entries of every successful swap since the
  last call, a later swap of the same source id overwriting its entry in place, and clears
  them (SWAP).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.core.invariants import Family
from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.ops.common import pairs

F = Family


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def table_slots(m: Model, op: ops.TableSlots) -> None:
    t = m.tables[op.table]
    got: Any = m.c.outcome.value
    if not isinstance(got, dict):
        m.c.flag(F.TABLE, "table slot read-outs missing", observed=got)
        return
    full = len(t.tokens)
    unseen = list(op.tokens[full:])
    if got.get("full_slots") != full:
        m.c.flag(F.TABLE, "num_full_slots", expected=full, observed=got.get("full_slots"))
    if got.get("unseen") != unseen:
        m.c.flag(F.TABLE, "get_unseen_token_ids", expected=unseen, observed=got.get("unseen"))
    first = m.bs - full % m.bs
    touched = 1 + cdiv(len(unseen) + op.lookahead - first, m.bs)
    if got.get("touched") != touched:
        m.c.flag(F.FREE, f"get_num_blocks_touched_by_append_slots(unseen, {op.lookahead})",
                 expected=touched, observed=got.get("touched"))
    required = cdiv(len(op.tokens) + op.lookahead, m.bs)
    if "required" in got and got["required"] != required:
        m.c.flag(F.FREE, f"get_num_required_blocks(seq, {m.bs}, {op.lookahead})",
                 expected=required, observed=got["required"])


def id_space(m: Model, op: ops.IdSpace) -> None:
    got: Any = m.c.outcome.value
    if not isinstance(got, dict):
        m.c.flag(F.SWAP, "id space read-outs missing", observed=got)
        return
    ids = m.pools[op.device].ids
    every = sorted(i for pool in m.pools.values() for i in pool.ids)
    if got.get("total") != len(ids):
        m.c.flag(F.FREE, f"get_num_total_blocks({op.device.value})", expected=len(ids),
                 observed=got.get("total"))
    if got.get("all") != every:
        m.c.flag(F.LEAK, "all_block_ids", expected=every, observed=got.get("all"))
    physical = [i - ids.start for i in op.ids]
    if got.get("physical") != physical:
        m.c.flag(F.SWAP, f"get_physical_block_id({op.device.value}, id) for ids "
                 f"{list(op.ids)}: positions in the device's sorted ids", expected=physical,
                 observed=got.get("physical"))


def swap_log(m: Model, op: ops.SwapLog) -> None:
    want = [[s, d] for s, d in m.swap_log.items()]
    m.swap_log.clear()
    got = pairs(m.c.outcome.value)
    if got != want:
        m.c.flag(F.SWAP, "get_and_reset_swaps: the swaps since the last reset", expected=want,
                 observed=m.c.outcome.value)


#: The table queries' steps (``TableSlots``, ``IdSpace``, ``SwapLog``).
TABLE_QUERY_STEPS: dict[type[ops.Op], Callable[[Model, Any], None]] = {
    ops.TableSlots: table_slots,
    ops.IdSpace: id_space,
    ops.SwapLog: swap_log,
}
