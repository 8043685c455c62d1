"""Marks: ``MarkAccessed`` stamps the GPU ids of blocks with a time (their LRU rank when they
become evictable); ``MarkComputed`` marks every block touched since the last call as holding
computed KV (the batch ran). Both are prefix-caching state: a naive target ignores them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Family
from models.families.v0.ops import common
from models.families.v0.ops.base import Arg, ArgSpec, Op
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
    misuse_family: ClassVar[Family] = Family.LRU
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
