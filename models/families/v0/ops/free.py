"""``Free``: one holder of a block's id gone; at zero a cached id becomes evictable, any other
free. Misuse: a double free. The id a freed handle held is remembered for stale-id calls
(``MarkStaleIds``, recorded by the oracle with :func:`record_free` once every world
agrees)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Invariant
from models.families.v0.invariants import Family
from models.families.v0.ops import common
from models.families.v0.ops.base import Arg, ArgSpec, Op

if TYPE_CHECKING:
    from collections.abc import Mapping

    from models.families.v0.allocator_model import Model


@dataclass(frozen=True, slots=True)
class Free(Op):
    """``free(block)``."""

    kind: ClassVar[str] = "free"
    misuse_family: ClassVar[Invariant] = Family.LEAK
    malformed: ClassVar[Mapping[str, ArgSpec]] = {"block": (Arg.BLOCK, False)}
    block: int

    def misuse(self, m: Model) -> str | None:
        rec = common.block(m, self.block)
        common.not_reused(m, rec)
        return None if rec.live else f"double free of block {self.block}"

    def step(self, m: Model) -> None:
        m.free(m.blocks[self.block])
        m.c.write(self.block, None, None)
        m.c.ended_blocks.append(self.block)

    def freed_block(self) -> int | None:
        return self.block


def record_free(m: Model, handle: int, block_id: int | None) -> None:
    """After a successful ``Free`` of ``handle``: remember the id it held (stale ids:
    ``MarkStaleIds``, ``models.families.v0.ops.marks``)."""
    if block_id is not None:
        m.seqs.freed_ids[handle] = block_id
