"""Semantics of the content-hash operations (``HASH_OPS`` in ``models.families.v0.operations``).

``HashRecompute``: a block's ``content_hash`` is ``None`` exactly when the model says the block
is unhashed (not full, or after an unhashed block: CACHE); a hashed block's value equals the
block class's own ``hash_block_tokens`` recomputed from the block's tokens, its predecessor's
hash (none for a first block) and its extra key, whether the token ids are plain ints or
instances of an ``int`` subclass, and (vLLM generation) whether a first block's missing
predecessor hash is passed as ``None`` or as the class's ``_none_hash`` (HASH). A
recomputation for an unhashed block hashes a partial block: a valid call whose value nothing
pins.

``AllocateImmutableIntLike``: exactly ``AllocateImmutable`` (``int(t)`` is the token id), so
its step is the allocation's own.

Contract (``models.families.v0.contract``, :func:`hash_contract`): prefix-caching targets only; a
live block whose ``is_first_block`` is true exactly when it starts its chain, and whose predecessor
is live and hashed (its object, and so its hash, is then the one the model knows); the sentinel only
for a first block of a vLLM-generation target.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.core.invariants import Family
from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.operations import Op

F = Family


def hash_contract(m: Model, op: ops.HashRecompute) -> str | None:
    """Why ``op`` is out of contract (a message), or None; never misuse."""
    if not m.pc:
        return "hash_block_tokens belongs to prefix-caching blocks"
    rec = m.blocks.recs.get(op.block)
    if op.block < 0 or rec is None:
        return f"block handle {op.block} never existed"
    if not rec.live:
        return f"block handle {op.block} was freed"
    if type(op.is_first_block) is not bool or op.is_first_block != (rec.prev is None):
        return f"is_first_block={op.is_first_block!r} for block {op.block}"
    if op.sentinel and not (op.is_first_block and m.caps.vllm_api):
        return "the _none_hash sentinel stands for a first block's predecessor (vLLM API)"
    if rec.prev is not None:
        prev = m.blocks[rec.prev]
        if not prev.live or prev.content is None:
            return f"the predecessor of block {op.block} is freed or unhashed"
    return None


def hash_recompute(m: Model, op: ops.HashRecompute) -> None:
    got = m.c.outcome.value
    if not isinstance(got, list) or len(got) != 2:
        m.c.flag(F.HASH, "hash_recompute: [content_hash, recomputed]", expected=2,
                 observed=got)
        return
    shown, recomputed = got
    rec = m.blocks[op.block]
    if (shown is None) != (rec.content is None):
        what = "hashed although not hashable (not full, or unhashed prefix)" \
            if rec.content is None else "full block with hashed prefix has no hash"
        m.c.flag(F.CACHE, f"block {op.block}: content_hash {what}",
                 expected=rec.content is not None, observed=shown)
    elif rec.content is not None and recomputed != shown:
        prev = "None" if op.is_first_block else "predecessor's hash as an int subclass" \
            if op.int_like else "predecessor's hash"
        tokens = "int-subclass token ids" if op.int_like else "its token ids"
        m.c.flag(F.HASH, f"block {op.block}: content_hash differs from hash_block_tokens("
                 f"{op.is_first_block}, {prev}, {tokens}, extra key)",
                 expected=shown, observed=recomputed)


HASH_STEPS: dict[type[Op], Callable[[Model, Any], None]] = {
    ops.HashRecompute: hash_recompute,
}
