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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from models.families.v0.invariants import Family
from models.families.v0.ops import common
from models.families.v0.ops.base import Op, Out
from models.families.v0.ops.common import pairs
from models.families.v0.ops.values import Dev, Tokens

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model

F = Family


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _held_table(m: Model, key: int, kind: str) -> None:
    """A table the program still holds (damaged: left open; freed: out of contract, upstream
    allocates a freed table afresh)."""
    t = common.table(m, key)
    common.left_open_if_damaged(m, t, kind)
    if not t.live:
        raise Out(f"{kind} on freed (empty) table {key}")


@dataclass(frozen=True, slots=True)
class TableSlots(Op):
    """``num_full_slots``, ``get_unseen_token_ids(tokens)`` (``tokens``: the whole sequence),
    ``get_num_blocks_touched_by_append_slots(unseen, lookahead)`` and, where the static method
    takes lookahead (vLLM generation), ``get_num_required_blocks(tokens, block_size,
    lookahead)``; value: ``{"full_slots": int, "unseen": [int], "touched": int[, "required":
    int]}``."""

    kind: ClassVar[str] = "table_slots"
    mutates: ClassVar[bool] = False
    table: int
    tokens: Tokens
    lookahead: int = 0

    def misuse(self, m: Model) -> str | None:
        _held_table(m, self.table, self.kind)
        if self.lookahead < 0:
            raise Out("negative lookahead")
        return None

    def step(self, m: Model) -> None:
        t = m.tables[self.table]
        got: Any = m.c.outcome.value
        if not isinstance(got, dict):
            m.c.flag(F.TABLE, "table slot read-outs missing", observed=got)
            return
        full = len(t.tokens)
        unseen = list(self.tokens[full:])
        if got.get("full_slots") != full:
            m.c.flag(F.TABLE, "num_full_slots", expected=full, observed=got.get("full_slots"))
        if got.get("unseen") != unseen:
            m.c.flag(F.TABLE, "get_unseen_token_ids", expected=unseen, observed=got.get("unseen"))
        first = m.bs - full % m.bs
        touched = 1 + cdiv(len(unseen) + self.lookahead - first, m.bs)
        if got.get("touched") != touched:
            m.c.flag(F.FREE, f"get_num_blocks_touched_by_append_slots(unseen, {self.lookahead})",
                     expected=touched, observed=got.get("touched"))
        required = cdiv(len(self.tokens) + self.lookahead, m.bs)
        if "required" in got and got["required"] != required:
            m.c.flag(F.FREE, f"get_num_required_blocks(seq, {m.bs}, {self.lookahead})",
                     expected=required, observed=got["required"])


@dataclass(frozen=True, slots=True)
class IdSpace(Op):
    """``get_num_total_blocks(device)``, ``all_block_ids`` and ``get_physical_block_id(device,
    i)`` for each ``i`` of ``ids`` (absolute ids of ``device``: GPU ``0..G-1``, CPU ``G..``);
    value: ``{"total": int, "all": sorted [int], "physical": [int]}``."""

    kind: ClassVar[str] = "id_space"
    mutates: ClassVar[bool] = False
    device: Dev
    ids: tuple[int, ...] = ()

    def misuse(self, m: Model) -> str | None:
        if any(i not in m.pools[self.device].ids for i in self.ids):
            raise Out(f"an id outside {self.device.value}")
        return None

    def step(self, m: Model) -> None:
        got: Any = m.c.outcome.value
        if not isinstance(got, dict):
            m.c.flag(F.SWAP, "id space read-outs missing", observed=got)
            return
        ids = m.pools[self.device].ids
        every = sorted(i for pool in m.pools.values() for i in pool.ids)
        if got.get("total") != len(ids):
            m.c.flag(F.FREE, f"get_num_total_blocks({self.device.value})", expected=len(ids),
                     observed=got.get("total"))
        if got.get("all") != every:
            m.c.flag(F.LEAK, "all_block_ids", expected=every, observed=got.get("all"))
        physical = [i - ids.start for i in self.ids]
        if got.get("physical") != physical:
            m.c.flag(F.SWAP, f"get_physical_block_id({self.device.value}, id) for ids "
                     f"{list(self.ids)}: positions in the device's sorted ids", expected=physical,
                     observed=got.get("physical"))


@dataclass(frozen=True, slots=True)
class SwapLog(Op):
    """``get_and_reset_swaps()``; value: ``[src, dst]`` pairs of every swap since the last
    call (a later swap of the same source id overwrites its entry in place)."""

    kind: ClassVar[str] = "swap_log"

    def step(self, m: Model) -> None:
        want = [[s, d] for s, d in m.swap_log.items()]
        m.swap_log.clear()
        got = pairs(m.c.outcome.value)
        if got != want:
            m.c.flag(F.SWAP, "get_and_reset_swaps: the swaps since the last reset", expected=want,
                     observed=m.c.outcome.value)


@dataclass(frozen=True, slots=True)
class TableReallocate(Op):
    """``allocate(tokens)`` on the existing table ``table``: a misuse while it holds blocks."""

    kind: ClassVar[str] = "table_reallocate"
    table: int
    tokens: Tokens

    def misuse(self, m: Model) -> str | None:
        _held_table(m, self.table, self.kind)
        if not self.tokens:
            raise Out("reallocate with no tokens")
        return f"allocate of table {self.table}, which already holds blocks"
