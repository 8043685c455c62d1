"""Block allocation: one empty block (``AllocateMutable``), one full block
(``AllocateImmutable``) or a chain of full blocks, all or nothing (``AllocateImmutableChain``).

An immutable block is full and follows a full block (or starts a chain); its content is its
chain's tokens and request keys (``Model.content_of``): an active cached id of that content is a
hit (no fresh id, one more holder), anything else takes a fresh id, which the target may pick
among those ``fresh_ids`` allows. A mutable block follows a full block and takes a fresh id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Invariant
from models.families.v0.content import ROOT
from models.families.v0.invariants import Family
from models.families.v0.ops import common
from models.families.v0.ops.base import Arg, ArgSpec, Op, Out
from models.families.v0.ops.values import Dev, Extra, Tokens

if TYPE_CHECKING:
    from collections.abc import Mapping

    from models.families.v0.allocator_model import Model

#: The arguments every allocation call validates.
_ALLOCATION_ARGS: dict[str, ArgSpec] = {"prev": (Arg.PREV, False), "device": (Arg.DEVICE, False),
                                        "extra_hash": (Arg.EXTRA, False)}


@dataclass(frozen=True, slots=True)
class AllocateMutable(Op):
    """``allocate_mutable_block(prev, device, extra_hash)``: one empty block chained to
    ``prev``."""

    kind: ClassVar[str] = "allocate_mutable"
    malformed: ClassVar[Mapping[str, ArgSpec]] = _ALLOCATION_ARGS
    prev: int | None
    device: Dev = Dev.GPU
    extra_hash: Extra = None

    def misuse(self, m: Model) -> str | None:
        common.extra(m, self.extra_hash)
        prev = common.prev(m, self.prev, self.device)
        if prev is not None and len(prev.tokens) != m.bs:
            raise Out(f"prev block {self.prev} is not full")
        return None

    def cost(self, m: Model) -> tuple[int, Dev]:
        return 1, self.device

    def step(self, m: Model) -> None:
        keys = common.new_handles(m, 1)
        if keys:
            hint = m.c.block_hint(keys[0])
            m.alloc_mutable(keys[0], self.device, self.prev, self.extra_hash, hint)
            m.c.write(keys[0], hint, None)


@dataclass(frozen=True, slots=True)
class AllocateImmutable(Op):
    """``allocate_immutable_block(prev, tokens, device, extra_hash)``: one full block."""

    kind: ClassVar[str] = "allocate_immutable"
    misuse_family: ClassVar[Invariant] = Family.CACHE
    malformed: ClassVar[Mapping[str, ArgSpec]] = {**_ALLOCATION_ARGS,
                                                  "tokens": (Arg.TOKENS, False)}
    prev: int | None
    tokens: Tokens
    device: Dev = Dev.GPU
    extra_hash: Extra = None

    def misuse(self, m: Model) -> str | None:
        common.extra(m, self.extra_hash)
        prev = common.prev(m, self.prev, self.device)
        return common.full_blocks(m, prev, (self.tokens,))

    def cost(self, m: Model) -> tuple[int, Dev]:
        content = m.content_of(self.prev, self.tokens, self.extra_hash)
        return m.chain_cost(self.device, [content]), self.device

    def step(self, m: Model) -> None:
        keys = common.new_handles(m, 1)
        if keys:
            hint = m.c.block_hint(keys[0])
            m.alloc_immutable(keys[0], self.device, self.prev, self.tokens, self.extra_hash,
                              hint)
            m.c.write(keys[0], hint, 0)

    def explain_success(self, m: Model) -> None:
        common.check_served(m, self.prev, (self.tokens,), self.extra_hash, self.device,
                            common.shown_new_blocks(m))


@dataclass(frozen=True, slots=True)
class AllocateImmutableChain(Op):
    """``allocate_immutable_blocks(prev, chunks, device, extra_hash)``: all or nothing."""

    kind: ClassVar[str] = "allocate_immutable_chain"
    amounts_to: ClassVar[str | None] = "allocate_immutable"
    misuse_family: ClassVar[Invariant] = Family.CACHE
    malformed: ClassVar[Mapping[str, ArgSpec]] = {**_ALLOCATION_ARGS,
                                                  "chunks": (Arg.CHUNKS, False)}
    prev: int | None
    chunks: tuple[Tokens, ...]
    device: Dev = Dev.GPU
    extra_hash: Extra = None

    def misuse(self, m: Model) -> str | None:
        common.extra(m, self.extra_hash)
        prev = common.prev(m, self.prev, self.device)
        return common.full_blocks(m, prev, self.chunks)

    def cost(self, m: Model) -> tuple[int, Dev]:
        contents = []
        node = ROOT if self.prev is None else m.blocks[self.prev].end
        for chunk in self.chunks:
            for tok in chunk:
                node = m.trie.step(node, tok, self.extra_hash)
            contents.append(node)
        return m.chain_cost(self.device, contents), self.device

    def step(self, m: Model) -> None:
        keys = common.new_handles(m, len(self.chunks))
        if keys is None:
            return
        prev = self.prev
        for key, chunk in zip(keys, self.chunks, strict=True):
            hint = m.c.block_hint(key)
            m.alloc_immutable(key, self.device, prev, chunk, self.extra_hash, hint)
            m.c.write(key, hint, 0)
            prev = key

    def explain_success(self, m: Model) -> None:
        common.check_served(m, self.prev, self.chunks, self.extra_hash, self.device,
                            common.shown_new_blocks(m))
