"""Swaps: blocks move to the other device (``Swap``), a whole sequence does (``TableSwap``),
or a custom swapper drives the two halves on each device's own allocator (``DeviceSwap``).

Every swap releases each block's source id and gives it a destination id: a full hashed block
by content (a hit on an active cached id costs nothing), any other block a fresh id
(``Model.swap``, ``Model.swap_cost``). The returned ``{source id: destination id}`` mapping
must be exactly that, in order, and the shadow memory carries each block's KV to its new id
(``moves_kv``).

Handles that share an id (a block and its fork) in one ``Swap``: targets that claim
atomicity (the bundled family: the swap is checked first, then done at once) move each source
id once: every handle of one source id lands on the same destination id, whose refcount is the
number of those handles, the mapping and the swap log hold the pair once, and the swap-in needs
(and queries the cache for) one destination id per distinct source id. For other targets such
a swap is out of contract: docs/API.md §4.5 re-allocates each block on its own, so a shared partial
block gets one id per handle and the ``{src: dst}`` mapping keeps only the last pair (vLLM 0.8
does exactly that; the engine swaps one sequence per call and never meets it).

``DeviceSwap``: ``swap_out`` on the source allocator releases every block's id (a cached id
whose refcount reaches 0 becomes evictable there), then ``swap_in`` on the destination gives
each block an id of that device, in order. It must match ``Swap`` in ids, refcounts, content and
cache hits, except that the device-aware allocator's swap log does not see it. A swap-in that
does not fit must raise ``NoFreeBlocksError`` before it takes any id (targets claiming
atomicity; for others it is out of contract: docs/API.md lets it stop midway); the swapper then
swaps the blocks back in on the source, last released first, so they are held there again, as
by a source-to-source swap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from models.core.invariants import Invariant
from models.families.v0.invariants import Family
from models.families.v0.ops import common
from models.families.v0.ops.base import Arg, ArgSpec, Op, Out
from models.families.v0.ops.common import pairs
from models.families.v0.ops.values import Dev
from models.families.v0.window import NULL_KEY, in_window

if TYPE_CHECKING:
    from collections.abc import Mapping

    from models.families.v0.allocator_model import Model
    from models.families.v0.blocks import BlockRec

F = Family


def keeps_shared_ids(m: Model) -> bool:
    """Whether the target must keep handles of one source id on one destination id."""
    return m.caps.atomic


def representatives(recs: list[BlockRec]) -> list[BlockRec]:
    """The first record of each distinct id, in order."""
    first: dict[int | None, BlockRec] = {}
    for rec in recs:
        first.setdefault(rec.id, rec)
    return list(first.values())


def check_mapping(m: Model, mapping: list[list[int]]) -> None:
    """The returned mapping is the model's ``[source id, destination id]`` pairs, in order."""
    got = pairs(m.c.outcome.value)
    if got != mapping:
        m.c.flag(F.SWAP, "swap mapping differs from {source id: destination id}",
                 expected=mapping, observed=m.c.outcome.value)


@dataclass(frozen=True, slots=True)
class Swap(Op):
    """``swap(blocks, src, dst)``: swap out of ``src`` then in to ``dst``.

    Value: the returned mapping as ``[src_id, dst_id]`` pairs in the mapping's order."""

    kind: ClassVar[str] = "swap"
    misuse_family: ClassVar[Invariant] = F.SWAP
    moves_kv: ClassVar[bool] = True
    malformed: ClassVar[Mapping[str, ArgSpec]] = {
        "blocks": (Arg.BLOCKS, False), "src": (Arg.DEVICE, False), "dst": (Arg.DEVICE, False)}
    blocks: tuple[int, ...]
    src: Dev
    dst: Dev

    def misuse(self, m: Model) -> str | None:
        common.api(m.caps.swap, "swap")
        recs = [common.block(m, h) for h in self.blocks]
        if self.src is self.dst:  # refused before the blocks are looked at
            return f"swap from {self.src.value} to itself"
        if len(set(self.blocks)) != len(self.blocks):
            return "the same block swapped twice"
        for rec in recs:
            common.not_reused(m, rec)
            if not rec.live or rec.device is not self.src:
                return f"block {rec.key} is not live on {self.src.value}"
        common.prefix_intact(m, recs)
        if len({r.id for r in recs}) != len(recs) and not keeps_shared_ids(m):
            raise Out("handles sharing an id swapped in one call by a target that does not "
                      "claim to keep them shared (docs/API.md §4.5 splits them, dropping a pair)")
        return None

    def cost(self, m: Model) -> tuple[int, Dev]:
        """One destination id per distinct source id when shared ids are kept, else one per
        block as docs/API.md re-allocates them (hits on active cached ids are free)."""
        recs = [m.blocks[h] for h in self.blocks]
        return m.swap_cost(representatives(recs) if keeps_shared_ids(m) else recs,
                           self.dst), self.dst

    def step(self, m: Model) -> None:
        """Per block unless ids repeat (then the target keeps them shared): the extra holders
        of each source id are released first, the representatives swapped as one swap, and
        every other holder given its representative's new id."""
        m.c.swapping = True
        recs = [m.blocks[h] for h in self.blocks]
        firsts = representatives(recs)
        hints = {h: m.c.block_hint(h) for h in self.blocks}
        if len(firsts) == len(recs) or not keeps_shared_ids(m):
            check_mapping(m, m.swap(recs, self.src, self.dst, [hints[h] for h in self.blocks]))
        else:
            first_of = {rec.id: rec for rec in firsts}  # source id -> its representative
            others = [rec for rec in recs if first_of[rec.id] is not rec]
            for rec in others:
                if rec.id is not None:  # never the last holder: its representative holds
                    m.pools[self.src].release(rec.id)
            sources = [rec.id for rec in others]
            mapping = m.swap(firsts, self.src, self.dst, [hints[rec.key] for rec in firsts])
            for rec, source in zip(others, sources, strict=True):
                rec.id = first_of[source].id
                rec.device = self.dst
                if rec.id is not None:
                    m.pools[self.dst].incref(rec.id)
            check_mapping(m, mapping)
        for h in self.blocks:
            m.c.write(h, hints[h], None)


@dataclass(frozen=True, slots=True)
class TableSwap(Op):
    """Engine swap of a whole sequence: admission check with the allocator's touched count,
    then ``swap(table.blocks, src, dst)`` and ``table.update(blocks)``; value as for ``Swap``.
    The null block of a sliding-window table stays where it is."""

    kind: ClassVar[str] = "table_swap"
    amounts_to: ClassVar[str | None] = "swap"
    misuse_family: ClassVar[Invariant] = F.SWAP
    moves_kv: ClassVar[bool] = True
    admitted_first: ClassVar[bool] = True
    table: int
    src: Dev
    dst: Dev

    def misuse(self, m: Model) -> str | None:
        t = common.table(m, self.table)
        common.left_open_if_damaged(m, t, self.kind)
        if not t.live:  # a freed table holds no blocks: upstream swaps nothing
            raise Out(f"{self.kind} on freed (empty) table {self.table}")
        common.api(m.caps.swap, "swap")
        if self.src is self.dst:
            return f"swap of table {self.table} from {self.src.value} to itself"
        return None if t.device is self.src else f"table {self.table} is not on {self.src.value}"

    def cost(self, m: Model) -> tuple[int, Dev]:
        t = m.tables[self.table]
        return m.swap_cost([m.blocks[k] for k in in_window(t)], self.dst), self.dst

    def step(self, m: Model) -> None:
        m.c.swapping = True
        t = m.tables[self.table]
        moved = [i for i, k in enumerate(t.blocks) if k != NULL_KEY]
        recs = [m.blocks[t.blocks[i]] for i in moved]
        hints = [m.c.table_hint(t.key, i) for i in moved]
        check_mapping(m, m.swap(recs, self.src, self.dst, hints))
        t.device = self.dst
        for i, hint in zip(moved, hints, strict=True):
            m.c.write(t.blocks[i], hint, None)


@dataclass(frozen=True, slots=True)
class DeviceSwap(Op):
    """A swap by hand: ``swap_out(blocks)`` on ``src``'s allocator, then ``swap_in(blocks)``
    on ``dst``'s. When the swap-in raises ``NoFreeBlocksError`` the swapper puts the blocks
    back, ``swap_in`` on ``src`` in reverse order, and reports the swap refused. Value:
    ``{"pairs": [[id before, id after] per block], "swapped": bool}``."""

    kind: ClassVar[str] = "device_swap"
    amounts_to: ClassVar[str | None] = "swap"
    misuse_family: ClassVar[Invariant] = F.SWAP  # a valid swap by hand refused with a typed error
    moves_kv: ClassVar[bool] = True
    blocks: tuple[int, ...]
    src: Dev
    dst: Dev

    def fits(self, m: Model) -> bool:
        """Whether the swap-in half finds enough free ids on ``dst``."""
        recs = [m.blocks[h] for h in self.blocks]
        return m.swap_cost(recs, self.dst) <= m.pools[self.dst].free

    def misuse(self, m: Model) -> str | None:
        if not m.caps.swap:
            raise Out("the target has no swap")
        if self.src is self.dst:
            raise Out("a swap by hand onto its own device")
        recs = common.distinct(m, self.blocks)
        if any(r.device is not self.src for r in recs):
            raise Out(f"a block not on {self.src.value}")
        # swap_in re-allocates each block under its prev_block, as ``Swap`` does
        common.prefix_intact(m, recs)
        if not self.fits(m):
            if not m.caps.atomic:
                raise Out("a swap-in that does not fit may stop midway (no atomicity claim)")
            if any(m.refcount[r.id] > 1 for r in recs if r.id is not None):
                raise Out("a refused swap of a shared id: its swap-out freed no id, so the "
                          "swapper may find none to put the block back")
        return None

    def cost(self, m: Model) -> tuple[int, Dev]:
        """None up front: a swap-in that does not fit is refused by the swapper, which puts
        the blocks back (judged by :meth:`step`)."""
        return 0, self.dst

    def step(self, m: Model) -> None:
        got = m.c.outcome.value
        shown: dict[str, Any] = got if isinstance(got, dict) else {}
        swapped = shown.get("swapped")
        fit = self.fits(m)
        if swapped is not fit:
            m.c.flag(F.FREE, f"a swap-in to {self.dst.value} that "
                     f"{'fits' if fit else 'does not fit'} must "
                     f"{'succeed' if fit else 'raise NoFreeBlocksError'}",
                     expected=fit, observed=swapped, root_cause=True)
            if swapped:
                return  # the model cannot follow a swap it says is impossible
        recs = [m.blocks[h] for h in self.blocks]
        old = [r.id for r in recs]
        hints = {h: m.c.block_hint(h) for h in self.blocks}
        m.c.swapping = True
        log = dict(m.swap_log)  # the device-aware allocator's log does not see it
        if fit:
            m.swap(recs, self.src, self.dst, [hints[r.key] for r in recs])
        else:
            # All or nothing on the destination; back on the source, last released first.
            self._destination_untouched(m)
            back = recs[::-1]
            m.swap(back, self.src, self.src, [hints[r.key] for r in back])
        m.swap_log = log
        want = [[i, r.id] for i, r in zip(old, recs, strict=True)]
        if _pairs(shown.get("pairs")) != want:
            m.c.flag(F.SWAP, "ids before and after the swap by hand", expected=want,
                     observed=shown.get("pairs"))
        for h in self.blocks:
            m.c.write(h, hints[h], None)

    def _destination_untouched(self, m: Model) -> None:
        """A refused swap-in leaves the destination as it was: its free count, and no block
        holding one of its ids (ATOMIC, the root cause of what the snapshot shows after)."""
        dst = m.pools[self.dst]
        shown = m.c.after.free.get(self.dst)
        if shown != dst.free:
            m.c.flag(F.ATOMIC, f"a refused swap-in changed the free count of {self.dst.value}",
                     expected=dst.free, observed=shown, root_cause=True)
        for h in self.blocks:
            got = m.c.after.blocks.get(h)
            if isinstance(got, int) and got in dst.ids:
                m.c.flag(F.ATOMIC, f"block {h} kept id {got} of {self.dst.value} after a "
                         "refused swap-in", observed=got, root_cause=True)


def _pairs(value: Any) -> list[list[int | None]] | None:
    """Pairs as shown (ids or None), or None when ``value`` is not a list of pairs."""
    try:
        return [[a, b] for a, b in value]
    except (TypeError, ValueError):
        return None


SWAP_OPS: tuple[type[Op], ...] = (Swap, TableSwap, DeviceSwap)
