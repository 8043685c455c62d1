"""Sliding-window tables: ``BlockTable(max_block_sliding_window=w)``.

An append to a windowed table with ``num_computed_slots = s`` first takes the null block (one
GPU id, taken on first use and never freed, forked, swapped or written), then frees every
block at an index below ``s // block_size - w`` that is not the null block yet and puts the
null block in its place; then it grows and writes like any append. A freed block drops one
reference: at zero a cached id becomes evictable, any other hashless.

The table keeps counting every token it was given (``num_full_slots``) but shows only the tokens
of the blocks it still holds; dropped blocks are always full and always a prefix of the table.
The contract keeps ``s <= len(tokens)``, so the last block and the block written first (and its
predecessor, whose hash chains into it) are never dropped; beyond the tokens, a drop that would
leave a block not yet full as the first one kept is misuse (its hash needs the dropped prefix).

A table holding the null block forks (the null entries are shared as the null block, the
window's blocks are forked as a chain of their own), swaps (the null block stays on the GPU
and is not in the mapping), frees (the null block is skipped) and appends like any table: the
first block kept is the first of its chain, so no surviving block links outside its table.
"""

from __future__ import annotations

from collections import Counter

from models.families.v0.allocator_model import Model
from models.families.v0.blocks import BlockRec, TableRec
from models.families.v0.invariants import Family
from models.families.v0.ops.values import Dev, Tokens

#: The table-entry key of the null block (never a program handle, never an internal key).
NULL_KEY = -(1 << 62)


def take_null(m: Model, shown: object) -> int:
    """``allocate_or_get_null_block()``: a fresh GPU id on first use (the target's ``shown``
    id if permitted), the same id ever after. Returns the model's null id."""
    if m.null_id is None:
        m.null_id = m.fresh(Dev.GPU, shown if isinstance(shown, int) else None)
        m.blocks.made += 1  # the null block is a block object too
    elif shown != m.null_id:
        m.c.flag(Family.LEAK, "the null block changed", expected=m.null_id, observed=shown)
    if NULL_KEY not in m.blocks:
        # A dead record: it is nobody's handle, so the model's LEAK/RC self-check counts the
        # null id once, through ``null_id``.
        m.blocks.recs[NULL_KEY] = BlockRec(NULL_KEY, Dev.GPU, None, None, id=m.null_id,
                                           live=False)
    return m.null_id


def drop_end(m: Model, t: TableRec, computed: int) -> int:
    """Entries below this index leave the window."""
    if t.window is None:
        return 0
    return max(0, computed // m.bs - t.window)


def dropped_keys(m: Model, t: TableRec, computed: int) -> list[int]:
    return [k for k in t.blocks[:drop_end(m, t, computed)] if k != NULL_KEY]


def ids_returned(m: Model, t: TableRec, computed: int) -> int:
    """Ids the drop gives back (free or evictable): those whose every reference it drops."""
    held = Counter(m.blocks[k].id for k in dropped_keys(m, t, computed))
    return sum(1 for i, n in held.items() if i is not None and m.refcount[i] == n)


def needs_null(m: Model, t: TableRec) -> bool:
    return t.window is not None and m.null_id is None


def drop(m: Model, t: TableRec, computed: int) -> None:
    """Free the blocks that left the window; the null block takes their entries."""
    end = drop_end(m, t, computed)
    for index in range(end):
        key = t.blocks[index]
        if key == NULL_KEY:
            continue
        m.free(m.blocks[key])
        m.c.write(key, None, None)  # kept as a record: the next block's ``prev`` names it
        t.blocks[index] = NULL_KEY


def in_window(t: TableRec) -> list[int]:
    """The table's keys that are not the null block (its window), in order."""
    return [k for k in t.blocks if k != NULL_KEY]


def holds_null(t: TableRec) -> bool:
    return bool(t.blocks) and t.blocks[0] == NULL_KEY


def visible_tokens(m: Model, t: TableRec) -> Tokens:
    """The tokens the table shows: those of the blocks it still holds."""
    if not holds_null(t):
        return t.tokens
    dropped = 0
    while dropped < len(t.blocks) and t.blocks[dropped] == NULL_KEY:
        dropped += 1
    return t.tokens[dropped * m.bs:]
