"""The content-hash operations (``HASH_OPS``).

``HashRecompute``: a block's ``content_hash`` is ``None`` exactly when the model says the block
is unhashed (not full, or after an unhashed block: CACHE); a hashed block's value equals the
block class's own ``hash_block_tokens`` recomputed from the block's tokens, its predecessor's
hash (none for a first block) and its extra key, whether the token ids are plain ints or
instances of an ``int`` subclass, and (vLLM generation) whether a first block's missing
predecessor hash is passed as ``None`` or as the class's ``_none_hash`` (HASH). A
recomputation for an unhashed block hashes a partial block: a valid call whose value nothing
pins.

``InjectedHash``: a target whose device-aware factory takes ``hash_function`` uses it for every
block of both devices (``models.families.v0.injected_hash``, whose docstring gives the
contract); ``tokens``, ``permuted`` and ``tail`` must be full blocks, ``permuted`` a permutation of
``tokens`` (else out of contract, never misuse).

``AllocateImmutableIntLike``: exactly ``AllocateImmutable`` (``int(t)`` is the token id), so
its step is the allocation's own.

Contract (:meth:`HashRecompute.misuse`, never misuse): prefix-caching targets only; a
live block whose ``is_first_block`` is true exactly when it starts its chain, and whose predecessor
is live and hashed (its object, and so its hash, is then the one the model knows); the sentinel only
for a first block of a vLLM-generation target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Invariant
from models.families.v0.injected_hash import injected_hash
from models.families.v0.invariants import Family
from models.families.v0.ops.allocate import AllocateImmutable
from models.families.v0.ops.base import Arg, ArgSpec, Op, Out
from models.families.v0.ops.values import Dev

if TYPE_CHECKING:
    from collections.abc import Mapping

    from models.families.v0.allocator_model import Model

F = Family


@dataclass(frozen=True, slots=True)
class HashRecompute(Op):
    """``block.content_hash``, then the block class's ``hash_block_tokens(is_first_block,
    prev_block.content_hash (None when first), block.token_ids[, extra_hash=block.extra_hash])``
    (Aphrodite: static, no ``extra_hash``; vLLM: a classmethod taking it). ``is_first_block``
    says whether ``block`` starts its chain; ``int_like`` passes the token ids, and a
    predecessor's hash, as instances of an ``int`` subclass; ``sentinel`` passes a first
    block's predecessor hash as the class's ``_none_hash`` (vLLM generation: the same as
    ``None``). Value: ``[content_hash, recomputed]``.

    A :class:`Malformed` call of it may also name ``prev_block_hash`` and ``token_ids``, the
    hash function's parameters the plan fills from the block."""

    kind: ClassVar[str] = "hash_recompute"
    # ``hash_block_tokens`` is static: refusing a bad argument changes nothing by
    # construction. Its token ids are int-like (``operator.index``; an engine passes numpy
    # ints), so a bool token is left open there; the allocation calls refuse bools.
    malformed: ClassVar[Mapping[str, ArgSpec]] = {
        "is_first_block": (Arg.FIRST_FLAG, False), "prev_block_hash": (Arg.PREV_HASH, False),
        "token_ids": (Arg.HASH_TOKENS, False)}
    misuse_family: ClassVar[Invariant] = Family.HASH  # a valid block's hash must be recomputed
    mutates: ClassVar[bool] = False
    block: int
    is_first_block: bool
    int_like: bool = False
    sentinel: bool = False

    def misuse(self, m: Model) -> str | None:
        out = self._out_of_contract(m)
        if out is not None:
            raise Out(out)
        return None

    def _out_of_contract(self, m: Model) -> str | None:
        """Why the call is out of contract (a message), or None; never misuse."""
        if not m.pc:
            return "hash_block_tokens belongs to prefix-caching blocks"
        rec = m.blocks.recs.get(self.block)
        if self.block < 0 or rec is None:
            return f"block handle {self.block} never existed"
        if not rec.live:
            return f"block handle {self.block} was freed"
        if type(self.is_first_block) is not bool or self.is_first_block != (rec.prev is None):
            return f"is_first_block={self.is_first_block!r} for block {self.block}"
        if self.sentinel and not (self.is_first_block and m.caps.vllm_api):
            return "the _none_hash sentinel stands for a first block's predecessor (vLLM API)"
        if rec.prev is not None:
            prev = m.blocks[rec.prev]
            if not prev.live or prev.content is None:
                return f"the predecessor of block {self.block} is freed or unhashed"
        return None

    def step(self, m: Model) -> None:
        got = m.c.outcome.value
        if not isinstance(got, list) or len(got) != 2:
            m.c.flag(F.HASH, "hash_recompute: [content_hash, recomputed]", expected=2,
                     observed=got)
            return
        shown, recomputed = got
        rec = m.blocks[self.block]
        if (shown is None) != (rec.content is None):
            what = "hashed although not hashable (not full, or unhashed prefix)" \
                if rec.content is None else "full block with hashed prefix has no hash"
            m.c.flag(F.CACHE, f"block {self.block}: content_hash {what}",
                     expected=rec.content is not None, observed=shown)
        elif rec.content is not None and recomputed != shown:
            prev = "None" if self.is_first_block else "predecessor's hash as an int subclass" \
                if self.int_like else "predecessor's hash"
            tokens = "int-subclass token ids" if self.int_like else "its token ids"
            m.c.flag(F.HASH, f"block {self.block}: content_hash differs from hash_block_tokens("
                     f"{self.is_first_block}, {prev}, {tokens}, extra key)",
                     expected=shown, observed=recomputed)


@dataclass(frozen=True, slots=True)
class AllocateImmutableIntLike(AllocateImmutable):
    """``AllocateImmutable`` with the token ids passed as instances of an ``int`` subclass
    (as numpy hands them out): the same call, so the same hit, hash and KV content."""

    kind: ClassVar[str] = "allocate_immutable_int_like"
    misuse_family: ClassVar[Invariant] = Family.CACHE


@dataclass(frozen=True, slots=True)
class InjectedHash(Op):
    """An extension (a device-aware ``create`` that takes ``hash_function``): beside the
    program's allocator, ``built = CpuGpuBlockAllocator.create("prefix_caching", 4, 4,
    block_size, hash_function=models.families.v0.injected_hash.injected_hash)``; then on each device
    (GPU first) ``x = allocate_immutable_block(None, tokens)``, ``y = allocate_immutable_block(None,
    permuted)``, ``z = allocate_mutable_block(None)`` then ``z.append_token_ids(permuted)``, and ``c
    = allocate_immutable_blocks(None, [permuted, tail])``. ``permuted`` is a permutation of
    ``tokens``; all three are one full block. Value: ``{"hashes": [[x, z, c[1] content_hash] per
    device], "ids": [[x, y, z, c[0] block_id] per device]}``. Semantics:
    ``models.families.v0.injected_hash``."""

    kind: ClassVar[str] = "injected_hash"
    mutates: ClassVar[bool] = False
    tokens: tuple[int, ...]
    permuted: tuple[int, ...]
    tail: tuple[int, ...]

    def misuse(self, m: Model) -> str | None:
        for name in ("tokens", "permuted", "tail"):
            tokens = getattr(self, name)
            if len(tokens) != m.bs or not all(type(t) is int for t in tokens):
                raise Out(f"{name} must be {m.bs} token ids")
        if sorted(self.permuted) != sorted(self.tokens):
            raise Out("permuted must be a permutation of tokens")
        return None

    def expected(self) -> list[list[int]]:
        """Per device: the three hashes ``[x, z, c1]`` (``injected_hash`` of the blocks'
        tokens)."""
        first = injected_hash(True, None, self.tokens)
        return [[first, first, injected_hash(False, first, self.tail)] for _ in Dev]

    def step(self, m: Model) -> None:
        """Judge the read-outs: hashes per device, and every block of ``tokens`` or a
        permutation of it on the one id ``x`` took."""
        got = m.c.outcome.value
        if not (isinstance(got, dict) and isinstance(got.get("hashes"), list)
                and isinstance(got.get("ids"), list)):
            m.c.flag(F.HASH, "injected hash read-outs missing", observed=got)
            return
        want = self.expected()
        for dev, hashes, want_hashes in zip(Dev, got["hashes"], want, strict=False):
            if hashes != want_hashes:
                m.c.flag(F.HASH, f"content_hash under an injected hash_function ({dev.value}; "
                         "immutable, filled by append, second of a chain)",
                         expected=want_hashes, observed=hashes)
        for dev, ids in zip(Dev, got["ids"], strict=False):
            if len(set(ids)) != 1:
                m.c.flag(F.CACHE, f"blocks whose injected hashes are equal must share one id "
                         f"({dev.value}; immutable, permuted immutable, filled mutable, chain "
                         "head)", observed=ids)
        if len(got["hashes"]) != len(want) or len(got["ids"]) != len(want):
            m.c.flag(F.HASH, "injected hash read-outs: one entry per device",
                     expected=len(want), observed=[len(got["hashes"]), len(got["ids"])])
