"""Primitives several operations' contracts and steps share: handles that must name a block
or table the program still holds, request keys a target must understand, a table whose block
was freed behind its back (``models.families.v0.table_misuse``), and the pairs a call returns.

Every check raises :class:`~models.families.v0.ops.base.Out` when the program left the
contract; the caller prefixes the operation's kind.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from models.families.v0.content import ROOT
from models.families.v0.invariants import Family
from models.families.v0.ops.base import Out
from models.families.v0.ops.values import Dev, Extra, ExtraKey
from models.families.v0.window import NULL_KEY

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model
    from models.families.v0.blocks import BlockRec, TableRec


def block(m: Model, h: int) -> BlockRec:
    """The record of block handle ``h`` (which must have existed)."""
    if h < 0 or h not in m.blocks:
        raise Out(f"block handle {h} never existed")
    return m.blocks[h]


def not_reused(m: Model, rec: BlockRec) -> None:
    """A freed handle whose object the target may have recycled names an unknown block."""
    if m.blocks.reusable(rec):
        raise Out(f"block handle {rec.key} was freed and its object may have been reused")


def prefix_intact(m: Model, recs: Iterable[BlockRec]) -> None:
    """Each block's predecessors are live. A predecessor freed while its successor lives (the
    engine never does this: ``BlockTable.free`` frees a whole chain) goes back to the target's
    pool (docs/API.md §4.2), and a swap re-allocates the successor under its ``prev_block``
    (docs/API.md §4.5) while it makes block objects: the recycled predecessor may come back as the
    new block itself (upstream: a cyclic chain, RecursionError) or hold other content (the
    successor re-hashed under it, an assertion). What the API specifies there is no defect, so
    such a swap is out of contract."""
    seen: set[int] = set()
    for rec in recs:
        cur = rec.prev
        while cur is not None and cur not in seen:
            seen.add(cur)
            prev = m.blocks.recs.get(cur)
            if prev is None or not prev.live:
                raise Out(f"block {rec.key} follows block {cur}, freed while block {rec.key} "
                          "lived")
            cur = prev.prev


def live(m: Model, h: int) -> BlockRec:
    """The record of block handle ``h``, which must still hold its block."""
    rec = block(m, h)
    if not rec.live:
        raise Out(f"block handle {h} was freed")
    return rec


def distinct(m: Model, blocks: tuple[int, ...]) -> list[BlockRec]:
    """Live blocks of one device-level call: no handle twice, no two sharing an id."""
    if len(set(blocks)) != len(blocks):
        raise Out("the same block twice in one call")
    recs = [live(m, h) for h in blocks]
    if len({r.id for r in recs}) != len(recs):
        raise Out("handles sharing an id in one device-level call")
    return recs


def prev(m: Model, prev: int | None, dev: Dev) -> BlockRec | None:
    """The predecessor named by an allocation (live, on the allocation's device)."""
    if prev is None:
        return None
    rec = live(m, prev)
    if rec.device is not dev:
        raise Out(f"prev block {prev} is on {rec.device.value}, not {dev.value}")
    return rec


def extra(m: Model, extra: Extra) -> None:
    """Request keys only for targets that take them, and only the kinds they understand."""
    if extra is not None and not (m.caps.extra_keys and m.caps.vllm_api):
        raise Out("extra_hash given to a target without extra keys")
    if isinstance(extra, ExtraKey) and not extra.fields_used <= m.caps.extra_key_fields:
        raise Out(f"extra key fields {sorted(extra.fields_used)} beyond the target's "
                  f"{sorted(m.caps.extra_key_fields)}")


def api(ok: bool, name: str) -> None:
    """A call the target's API generation has."""
    if not ok:
        raise Out(f"{name} is not in this target's API generation")


def full_blocks(m: Model, prev: BlockRec | None, chunks: Iterable[tuple[int, ...]]) -> str | None:
    """Immutable blocks are full and follow a full block (misuse on a prefix-caching target,
    out of contract on a naive one)."""
    for chunk in chunks:
        if len(chunk) > m.bs or (m.pc and len(chunk) != m.bs):
            return f"immutable block of {len(chunk)} tokens (block size {m.bs})"
        if len(chunk) != m.bs:
            raise Out("naive allocator: partial immutable block")
    if prev is not None and len(prev.tokens) != m.bs:
        if m.pc:
            return f"immutable block after unhashed block {prev.key}"
        raise Out("naive allocator: immutable block after a partial block")
    return None


# --------------------------------------------------------------------------- tables


def table(m: Model, key: object) -> TableRec:
    """The record of table handle ``key`` (which must have existed)."""
    if not isinstance(key, int) or key not in m.tables:
        raise Out(f"table handle {key} never existed")
    return m.tables[key]


def dead_indices(m: Model, t: TableRec) -> list[int]:
    """Indices of the table's blocks freed behind its back (never the null block)."""
    return [i for i, k in enumerate(t.blocks) if k != NULL_KEY and not m.blocks[k].live]


def is_damaged(m: Model, t: TableRec) -> bool:
    """A live table holding a block freed behind its back."""
    return t.live and bool(dead_indices(m, t))


def reused(m: Model, t: TableRec) -> bool:
    """Some freed object of the table may have been handed out again by the block pool."""
    return any(m.blocks.reusable(m.blocks[t.blocks[i]]) for i in dead_indices(m, t))


def damage(m: Model, t: TableRec) -> list[int]:
    """The indices of a live table's blocks freed behind its back (``[]`` if none); out of
    contract once one of their objects may have been reused."""
    if not is_damaged(m, t):
        return []
    if reused(m, t):
        raise Out(f"table {t.key} holds a freed block whose object may have been reused")
    return dead_indices(m, t)


def left_open(t: TableRec, dead: list[int], kind: str) -> Out:
    """What a damaged table may not do is judged by the operation; everything else it is
    asked is left open (``models.families.v0.table_misuse``)."""
    return Out(f"{kind} of table {t.key}, whose block {dead[0]} was freed behind it "
               "(left open)")


def left_open_if_damaged(m: Model, t: TableRec, kind: str) -> None:
    """:func:`left_open` when the table is damaged."""
    dead = damage(m, t)
    if dead:
        raise left_open(t, dead, kind)


# --------------------------------------------------------------------------- observations


def pairs(value: Any) -> list[list[int]] | None:
    """A returned list of int pairs (a swap mapping, copy-on-write pairs), or None."""
    try:
        return [[int(a), int(b)] for a, b in value]
    except (TypeError, ValueError):
        return None


def new_handles(m: Model, count: int) -> list[int] | None:
    """The ``count`` block handles the runner made for a successful call (TABLE if not)."""
    made = list(m.c.outcome.new_blocks)
    if len(made) != count:
        m.c.flag(Family.TABLE, f"expected {count} new block handle(s)", expected=count,
                 observed=made)
        return None
    return made


def shown_new_blocks(m: Model) -> list[tuple[object, object]]:
    """The (id, hash) each new block handle of the call shows."""
    after = m.c.after
    return [(after.blocks.get(h), after.block_hashes.get(h)) for h in m.c.outcome.new_blocks]


def check_served(m: Model, start: int | None, chunks: Iterable[tuple[int, ...]], extra: Extra,
                 device: Dev, shown: Iterable[tuple[object, object]]) -> None:
    """An allocation of full ``chunks`` after block ``start`` that cannot fit succeeded: were
    its blocks (the ``(id, hash)`` each shows, in order) served by ids that hold other content
    (CONTENT), or do their hashes disagree with their content (HASH)?"""
    node = ROOT if start is None else m.blocks[start].end
    pool = m.pools[device]
    for chunk, (shown_id, shown_hash) in zip(chunks, shown, strict=False):
        for tok in chunk:
            node = m.trie.step(node, tok, extra)
        held = pool.content_of.get(shown_id) if isinstance(shown_id, int) else None
        if held is not None and held != node:
            m.c.flag(Family.CONTENT, f"served by cached id {shown_id}, which holds other "
                     "content", observed=shown_id)
        if isinstance(shown_hash, int):
            m.hashes.check(m.c, "new block", node, shown_hash)
