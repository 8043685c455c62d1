"""``Append``: tokens written into the last block of a chain.

A shared block is copied first (copy-on-write: a fresh id, the pair recorded); a block that
fills is promoted (prefix caching: it takes its content's cached id if one is cached with
computed KV, the written id going back to the pool; an unwritten cached id it may take or
retire, see ``models.families.v0.pool``). Misuse: writing into a hashed (immutable) block,
past the block size, or filling a freed block (which would need an id to be promoted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.families.v0.ops import common
from models.families.v0.ops.base import Arg, ArgSpec, Op, Out
from models.families.v0.ops.values import Dev, Tokens

if TYPE_CHECKING:
    from collections.abc import Mapping

    from models.families.v0.allocator_model import Model


@dataclass(frozen=True, slots=True)
class Append(Op):
    """``block.append_token_ids(tokens)``: copy-on-write if shared, promotion once full."""

    kind: ClassVar[str] = "append"
    malformed: ClassVar[Mapping[str, ArgSpec]] = {"tokens": (Arg.TOKENS, False)}
    block: int
    tokens: Tokens

    def misuse(self, m: Model) -> str | None:
        rec = common.block(m, self.block)
        common.not_reused(m, rec)
        if not rec.live:
            # Upstream writes into id-less block objects; only a write that fills one (and so
            # needs an id to be promoted) must be refused.
            if m.pc and len(rec.tokens) + len(self.tokens) == m.bs:
                return f"append fills freed block {self.block}"
            raise Out(f"partial append to freed block {self.block}")
        if rec.device is Dev.CPU:
            raise Out("append to a swapped-out (CPU) block")
        if not m.blocks.is_last(self.block):
            raise Out(f"block {self.block} is not the last of its chain")
        if any(not m.blocks[k].live for k in m.blocks.chain(self.block)):
            raise Out(f"block {self.block} follows a freed block")
        if m.pc and rec.content is not None:
            return f"append to immutable (hashed) block {self.block}"
        if len(rec.tokens) + len(self.tokens) > m.bs:
            return f"append overflows block {self.block}"
        return None

    def cost(self, m: Model) -> tuple[int, Dev]:
        """A copy-on-write takes one fresh id (a naive target copies even for no tokens)."""
        rec = m.blocks[self.block]
        copies = m.shared(rec) and (bool(self.tokens) or not m.pc)
        return int(copies), rec.device

    def step(self, m: Model) -> None:
        rec = m.blocks[self.block]
        first = len(rec.tokens)
        hint = m.c.block_hint(self.block)
        m.append(rec, self.tokens, hint)
        m.c.write(self.block, hint, first if self.tokens else None)
