"""``Fork``: new handles sharing every id of a chain (each id gains one holder).

Misuse: a chain holding a freed block. A chain spanning both devices is out of contract."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Invariant
from models.families.v0.invariants import Family
from models.families.v0.ops import common
from models.families.v0.ops.base import Arg, ArgSpec, Op, Out

if TYPE_CHECKING:
    from collections.abc import Mapping

    from models.families.v0.allocator_model import Model


@dataclass(frozen=True, slots=True)
class Fork(Op):
    """``fork(block)``: new handles sharing every id of the chain ending at ``block``."""

    kind: ClassVar[str] = "fork"
    misuse_family: ClassVar[Invariant] = Family.RC
    crash_family: ClassVar[Invariant] = Family.TABLE  # forks of any length must work
    malformed: ClassVar[Mapping[str, ArgSpec]] = {"block": (Arg.BLOCK, False)}
    block: int

    def misuse(self, m: Model) -> str | None:
        common.block(m, self.block)
        chain = [m.blocks[k] for k in m.blocks.chain(self.block)]
        for r in chain:
            common.not_reused(m, r)
        if any(not r.live for r in chain):
            return f"fork of a chain holding a freed block ({self.block})"
        if len({r.device for r in chain}) > 1:
            raise Out("fork of a chain spanning both devices")
        return None

    def step(self, m: Model) -> None:
        chain = m.blocks.chain(self.block)
        keys = common.new_handles(m, len(chain))
        if keys:
            m.fork(chain, keys)
            for key in keys:
                m.c.write(key, m.c.block_hint(key), None)
