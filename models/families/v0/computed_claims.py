"""What an answer that lets the engine skip work claims about KV memory
(docs/CONTRACT.md, "The engine's compute step").

Computed-id queries (``get_computed_block_ids``, the Aphrodite tracker's
``get_cached_computed_blocks_and_update``), ``find_cached_blocks_prefix`` and the vLLM
tracker's ``get_num_cached_tokens`` each tell the engine "the first k blocks of this
sequence hold computed KV; skip them". The claim is judged twice:

- as a *prefix*: the answer names the first k blocks asked about, in order (a computed id
  after an uncomputed one is a hole: the engine skips the wrong tokens), COMPUTED;
- against the shadow memory (``ShadowMemory.check_claims``): each of those ids holds valid
  KV of exactly that block's content.

``claims`` returns (position, id, identities) per claimed block, or a violation when the
answer is not a prefix. Answers of the wrong type are left to the model's exact checks.
"""

from __future__ import annotations

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, Op

F = Family
Claim = tuple[int, object, list[int]]
CLAIMING = (ops.ComputedBlockIds, ops.CachedPrefix, ops.SeqCachedTokens, ops.SeqComputedIds)


def claims(m: Model, op: Op, value: object) -> tuple[list[Claim], Violation | None]:
    if not m.pc or not isinstance(op, CLAIMING):
        return [], None
    if isinstance(op, ops.SeqCachedTokens):
        return _cached_tokens(m, op, value), None
    if not isinstance(value, list):
        return [], None
    if isinstance(op, ops.CachedPrefix):
        return _cached_prefix(m, op, value)
    keys = list(op.blocks) if isinstance(op, ops.ComputedBlockIds) else \
        list(m.tables[op.table].blocks)
    asked = [m.blocks[k].id for k in keys]
    if value != asked[:len(value)]:
        return [], Violation(F.COMPUTED, f"{op.kind}: the computed ids are not a prefix of the "
                             "ids asked about (an engine skips len(answer) blocks)",
                             expected=f"a prefix of {asked}", observed=value)
    return [(j, i, m.blocks[k].idents) for j, (i, k) in enumerate(zip(value, keys,
                                                                       strict=False))], None


def _cached_prefix(m: Model, op: ops.CachedPrefix, value: list[object]
                   ) -> tuple[list[Claim], Violation | None]:
    hashes = [m.c.after.block_hashes.get(h) for h in op.blocks]
    if value != hashes[:len(value)]:
        return [], Violation(F.COMPUTED, "find_cached_blocks_prefix: the answer is not a "
                             "prefix of the hashes asked about", expected=f"a prefix of "
                             f"{hashes}", observed=value)
    pool = m.pools[Dev.GPU]
    out: list[Claim] = []
    for j, h in enumerate(op.blocks[:len(value)]):
        rec = m.blocks[h]
        cached = None if rec.content is None else pool.id_of.get(rec.content)
        if cached is not None:
            out.append((j, cached, rec.idents))
    return out, None


def _cached_tokens(m: Model, op: ops.SeqCachedTokens, value: object) -> list[Claim]:
    """The table's first ``value // block_size`` blocks, for a GPU table (whose full blocks
    hold the ids their contents are cached under) without a window."""
    t = m.tables[op.table]
    if not isinstance(value, int) or t.device is not Dev.GPU or t.window is not None:
        return []
    n = min(value // m.bs, len(t.blocks))
    return [(j, m.blocks[k].id, m.blocks[k].idents) for j, k in enumerate(t.blocks[:n])]
