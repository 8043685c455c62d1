"""Sequence-level operations (``BlockTable``), composed from the block-level model.

A table is a chain of block records (negative keys) plus its token list, extra key and device.
``append_token_ids`` = ``ensure_num_empty_slots(len + lookahead)``, then the tokens fill the
current partial block first and whole blocks after it; every written block that is shared is
copied on write and every block that fills is promoted. It fits iff new blocks + shared
written blocks <= free (a promotion onto a cached id never costs more).

Hidden choices: a new block that fills and is promoted onto an already cached id gives its
fresh id back, so the target never shows it. When that id came from an eviction (no hashless
id left) the victim is unobservable; the model explores every permitted victim (see
``choice``), pruning with the evictable set when the target can be introspected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.core.invariants import Family
from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.block_ops import check_mapping, mark_ids
from models.families.v0.blocks import TableRec
from models.families.v0.content import ROOT
from models.families.v0.operations import Dev
from models.families.v0.table_queries import id_space, null_block_query, swap_log, table_slots
from models.families.v0.window import NULL_KEY, drop, ids_returned, in_window, needs_null, take_null


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def new_blocks_needed(m: Model, t: TableRec, slots: int) -> int:
    empty = len(t.blocks) * m.bs - len(t.tokens)
    return cdiv(slots - empty, m.bs) if slots > empty else 0


def written_indices(m: Model, t: TableRec, count: int) -> range:
    if not count:
        return range(0)
    first = len(t.tokens) // m.bs
    return range(first, (len(t.tokens) + count - 1) // m.bs + 1)


def append_cost(m: Model, t: TableRec, op: ops.TableAppend) -> int:
    """Net GPU ids taken: the null block (first use), new blocks and copies, less the ids
    the window drop gives back; the null block is taken first, so it alone needs a free id."""
    new = new_blocks_needed(m, t, len(op.tokens) + op.lookahead)
    shared = sum(1 for i in written_indices(m, t, len(op.tokens))
                 if i < len(t.blocks) and m.shared(m.blocks[t.blocks[i]]))
    if t.window is None or op.computed is None:
        return new + shared
    null = needs_null(m, t)
    if null and m.pools[Dev.GPU].free < 1:
        return 1
    return null + new + shared - ids_returned(m, t, op.computed)


def allocate_cost(m: Model, op: ops.TableAllocate) -> int:
    full = len(op.tokens) // m.bs
    contents = []
    node = ROOT
    for i in range(full):
        for tok in op.tokens[i * m.bs:(i + 1) * m.bs]:
            node = m.trie.step(node, tok, op.extra_hash)
        contents.append(node)
    return m.chain_cost(op.device, contents) + (1 if len(op.tokens) % m.bs else 0)


def _ensure(m: Model, t: TableRec, slots: int, fill_to: int) -> None:
    """Add mutable blocks until ``slots`` are empty; a block that ``fill_to`` tokens will fill
    may be promoted away, so its fresh id may stay hidden."""
    for _ in range(new_blocks_needed(m, t, slots)):
        index = len(t.blocks)
        hint = m.c.table_hint(t.key, index)
        may_hide = m.pc and (index + 1) * m.bs <= fill_to
        rec = m.alloc_mutable(m.blocks.internal_key(), Dev.GPU, t.blocks[-1], t.extra, hint,
                              may_hide=may_hide)
        t.blocks.append(rec.key)
        m.c.write(rec.key, hint, None)


def table_allocate(m: Model, op: ops.TableAllocate) -> None:
    key = m.c.outcome.new_table
    if key is None:
        m.c.flag(Family.TABLE, "no table handle reported for a successful allocate")
        return
    t = m.tables[key] = TableRec(key, op.device, op.extra_hash, window=op.window)
    m.live_tables.add(key)
    prev: int | None = None
    bs = m.bs
    for i in range(0, len(op.tokens), bs):
        chunk = op.tokens[i:i + bs]
        hint = m.c.table_hint(key, len(t.blocks))
        if len(chunk) == bs:
            rec = m.alloc_immutable(m.blocks.internal_key(), op.device, prev, chunk,
                                    op.extra_hash, hint)
        else:
            rec = m.alloc_mutable(m.blocks.internal_key(), op.device, prev, op.extra_hash, hint)
            m.extend(rec, chunk)
        t.blocks.append(rec.key)
        m.c.write(rec.key, hint, 0)
        prev = rec.key
    t.tokens += tuple(op.tokens)


def table_append(m: Model, op: ops.TableAppend) -> None:
    t = m.tables[op.table]
    if t.window is not None and op.computed is not None:
        take_null(m, m.c.outcome.value)
        drop(m, t, op.computed)
    total = len(t.tokens) + len(op.tokens)
    _ensure(m, t, len(op.tokens) + op.lookahead, total)
    pos = 0
    for index in written_indices(m, t, len(op.tokens)):
        rec = m.blocks[t.blocks[index]]
        room = m.bs - len(rec.tokens)
        chunk = op.tokens[pos:pos + room]
        pos += len(chunk)
        first = len(rec.tokens)
        hint = m.c.table_hint(t.key, index)
        m.append(rec, chunk, hint)
        m.c.write(rec.key, hint, first)
    t.tokens += tuple(op.tokens)


def table_ensure_slots(m: Model, op: ops.TableEnsureSlots) -> None:
    t = m.tables[op.table]
    _ensure(m, t, op.slots, len(t.tokens))


def table_fork(m: Model, op: ops.TableFork) -> None:
    src = m.tables[op.table]
    key = m.c.outcome.new_table
    if key is None:
        m.c.flag(Family.TABLE, "no table handle reported for a successful fork")
        return
    t = m.tables[key] = TableRec(key, src.device, src.extra, tokens=src.tokens,
                                 window=src.window)
    m.live_tables.add(key)
    window = in_window(src)  # the null block is shared, not forked
    keys = [m.blocks.internal_key() for _ in window]
    m.fork(window, keys)
    t.blocks = [NULL_KEY] * (len(src.blocks) - len(window)) + keys
    for i, k in enumerate(t.blocks):
        if k != NULL_KEY:
            m.c.write(k, m.c.table_hint(key, i), None)


def table_free(m: Model, op: ops.TableFree) -> None:
    t = m.tables[op.table]
    held = [k for k in t.blocks if k != NULL_KEY]  # the allocator never frees the null block
    for k in held:
        m.free(m.blocks[k])
        m.c.write(k, None, None)
    m.c.forget.extend(held)  # dropped once the step is judged
    t.blocks = []
    t.live = False
    m.live_tables.discard(op.table)
    m.c.ended_tables.append(op.table)


def table_swap(m: Model, op: ops.TableSwap) -> None:
    m.c.swapping = True
    t = m.tables[op.table]
    moved = [i for i, k in enumerate(t.blocks) if k != NULL_KEY]  # the null block stays
    recs = [m.blocks[t.blocks[i]] for i in moved]
    hints = [m.c.table_hint(t.key, i) for i in moved]
    check_mapping(m, m.swap(recs, op.src, op.dst, hints))
    t.device = op.dst
    for i, hint in zip(moved, hints, strict=True):
        m.c.write(t.blocks[i], hint, None)


def table_mark_accessed(m: Model, op: ops.TableMarkAccessed) -> None:
    mark_ids(m, [m.blocks[k].id for k in m.tables[op.table].blocks], op.now)


TABLE_STEPS: dict[type[ops.Op], Callable[[Model, Any], None]] = {
    ops.TableAllocate: table_allocate,
    ops.TableAppend: table_append,
    ops.TableEnsureSlots: table_ensure_slots,
    ops.TableFork: table_fork,
    ops.TableFree: table_free,
    ops.TableSwap: table_swap,
    ops.TableMarkAccessed: table_mark_accessed,
    ops.TableSlots: table_slots,
    ops.IdSpace: id_space,
    ops.SwapLog: swap_log,
    ops.NullBlockQuery: null_block_query,
}
