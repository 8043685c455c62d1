"""Marks: ``MarkAccessed`` stamps the GPU ids of blocks with a time (their LRU rank when they
become evictable); ``MarkComputed`` marks every block touched since the last call as holding
computed KV (the batch ran). Both are prefix-caching state: a naive target ignores them.

Stale id lists: ``MarkStaleIds`` marks the ids freed handles held (an engine that stamps a
sequence's ids after the sequence freed some of them). Each handle names an id: the one it
holds if live, else the one it held when it was freed (the oracle records it at the ``Free``,
in ``SeqState.freed_ids``). For a prefix-caching target, per id (docs/API.md §4.3):

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

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Invariant
from models.families.v0.invariants import Family
from models.families.v0.ops import common
from models.families.v0.ops.base import Arg, ArgSpec, Op, Out
from models.families.v0.ops.values import Dev

if TYPE_CHECKING:
    from collections.abc import Mapping

    from models.families.v0.allocator_model import Model


def mark_ids(m: Model, ids: list[int | None], now: float) -> None:
    """Stamp each GPU id with ``now`` (prefix caching only; freed handles' ``None`` skipped)."""
    if not m.pc:
        return
    gpu = m.pools[Dev.GPU]
    for block_id in ids:
        if block_id is not None:
            gpu.accessed[block_id] = now


@dataclass(frozen=True, slots=True)
class MarkAccessed(Op):
    """``mark_blocks_as_accessed(ids of blocks, now)``."""

    kind: ClassVar[str] = "mark_accessed"
    misuse_family: ClassVar[Invariant] = Family.LRU
    malformed: ClassVar[Mapping[str, ArgSpec]] = {"blocks": (Arg.GPU_IDS, True),
                                                  "now": (Arg.TIME, True)}
    blocks: tuple[int, ...]
    now: float

    def misuse(self, m: Model) -> str | None:
        recs = [common.live(m, h) for h in self.blocks]
        if m.pc and any(r.device is Dev.CPU for r in recs):
            return "mark_blocks_as_accessed with a CPU block"
        return None

    def step(self, m: Model) -> None:
        mark_ids(m, [m.blocks[h].id for h in self.blocks], self.now)


@dataclass(frozen=True, slots=True)
class MarkComputed(Op):
    """``mark_blocks_as_computed(ids)``: marks every block touched since the last call."""

    kind: ClassVar[str] = "mark_computed"
    computes_kv: ClassVar[bool] = True  # the batch ran: its KV is written
    blocks: tuple[int, ...] = ()

    def misuse(self, m: Model) -> str | None:
        for h in self.blocks:
            common.block(m, h)
        return None

    def step(self, m: Model) -> None:
        if not m.pc:
            return
        gpu = m.pools[Dev.GPU]
        gpu.computed.update(i for i in gpu.touched if gpu.is_active(i))
        gpu.touched.clear()
        gpu.revived.clear()


def stale_id(m: Model, handle: int) -> int:
    """The id ``handle`` names: held now, or held when it was freed."""
    if handle < 0 or handle not in m.blocks:
        raise Out(f"block handle {handle} never existed")
    rec = m.blocks[handle]
    if rec.live and rec.id is not None:
        return rec.id
    freed = m.seqs.freed_ids.get(handle)
    if freed is None:
        raise Out(f"block handle {handle} was never freed holding an id")
    return freed


@dataclass(frozen=True, slots=True)
class MarkStaleIds(Op):
    """``mark_blocks_as_accessed(ids, now)`` with, for each handle, the id it holds if live,
    else the id it held when it was freed. Per id (docs/API.md §4.3): active -> access time;
    evictable -> ``evictor.update`` (its LRU rank moves); free -> misuse (``ValueError``);
    another device's -> misuse (``KeyError``). Every id is checked before any is marked."""

    kind: ClassVar[str] = "mark_stale_ids"
    misuse_family: ClassVar[Invariant] = Family.LRU  # a free id marked
    blocks: tuple[int, ...]
    now: float

    def misuse(self, m: Model) -> str | None:
        ids = [stale_id(m, h) for h in self.blocks]
        if not m.pc:
            return None
        gpu = m.pools[Dev.GPU]
        for h, block_id in zip(self.blocks, ids, strict=True):
            if block_id not in gpu.ids:
                return f"mark_blocks_as_accessed of CPU id {block_id} (block {h})"
            if not gpu.is_active(block_id) and block_id not in gpu.evictor:
                return f"mark_blocks_as_accessed of free id {block_id} (block {h} held it)"
        return None

    def step(self, m: Model) -> None:
        if not m.pc:
            return
        gpu = m.pools[Dev.GPU]
        for block_id in (stale_id(m, h) for h in self.blocks):
            if gpu.is_active(block_id):
                gpu.accessed[block_id] = self.now
            else:
                gpu.evictor.touch(block_id, self.now)
