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

A table whose block was freed behind its back (``TableFreeBlock``, ``table_misuse``) must
refuse ``free()``, ``fork()`` and an append into the freed block; everything else it is asked
is left open. Sliding-window tables: ``models.families.v0.window`` (the ``TableSwap`` of a
table: ``models.families.v0.ops.swap``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Invariant
from models.families.v0.blocks import TableRec
from models.families.v0.content import ROOT
from models.families.v0.invariants import Family
from models.families.v0.ops import common
from models.families.v0.ops.base import Arg, ArgSpec, Op, Out
from models.families.v0.ops.marks import mark_ids
from models.families.v0.ops.values import Dev, Extra, Tokens
from models.families.v0.window import (
    NULL_KEY,
    drop,
    ids_returned,
    in_window,
    needs_null,
    take_null,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from models.families.v0.allocator_model import Model


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def new_blocks_needed(m: Model, t: TableRec, slots: int) -> int:
    """Blocks the table must add so that ``slots`` slots are empty."""
    empty = len(t.blocks) * m.bs - len(t.tokens)
    return cdiv(slots - empty, m.bs) if slots > empty else 0


def written_indices(m: Model, t: TableRec, count: int) -> range:
    """The indices of the blocks ``count`` more tokens are written into."""
    if not count:
        return range(0)
    first = len(t.tokens) // m.bs
    return range(first, (len(t.tokens) + count - 1) // m.bs + 1)


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


def _growable(m: Model, t: TableRec, kind: str) -> str | None:
    """The contract shared by the calls that grow a table: refused once freed (misuse), left
    open on a swapped-out (CPU) table."""
    if not t.live:
        return f"{kind} on freed table {t.key}"
    if t.device is Dev.CPU:
        raise Out("appending to a swapped-out (CPU) table")
    return None


@dataclass(frozen=True, slots=True)
class TableAllocate(Op):
    """New ``BlockTable``; ``allocate(tokens, device, extra_hash)``: full chunks immutable, tail
    mutable."""

    kind: ClassVar[str] = "table_allocate"
    amounts_to: ClassVar[str | None] = "allocate_immutable"
    malformed: ClassVar[Mapping[str, ArgSpec]] = {
        "tokens": (Arg.TOKENS, False), "device": (Arg.DEVICE, False),
        "extra_hash": (Arg.EXTRA, False)}
    tokens: Tokens
    device: Dev = Dev.GPU
    extra_hash: Extra = None
    window: int | None = None  # BlockTable(max_block_sliding_window=window)

    def misuse(self, m: Model) -> str | None:
        common.extra(m, self.extra_hash)
        if self.window is not None and self.window < 1:
            raise Out("a sliding window of fewer than one block")
        return None if self.tokens else "allocate of an empty table"

    def cost(self, m: Model) -> tuple[int, Dev]:
        """Full chunks by content (hits are free), a partial tail one fresh id."""
        full = len(self.tokens) // m.bs
        contents = []
        node = ROOT
        for i in range(full):
            for tok in self.tokens[i * m.bs:(i + 1) * m.bs]:
                node = m.trie.step(node, tok, self.extra_hash)
            contents.append(node)
        return m.chain_cost(self.device, contents) + (1 if len(self.tokens) % m.bs else 0), \
            self.device

    def step(self, m: Model) -> None:
        key = m.c.outcome.new_table
        if key is None:
            m.c.flag(Family.TABLE, "no table handle reported for a successful allocate")
            return
        t = m.tables[key] = TableRec(key, self.device, self.extra_hash, window=self.window)
        m.live_tables.add(key)
        prev: int | None = None
        bs = m.bs
        for i in range(0, len(self.tokens), bs):
            chunk = self.tokens[i:i + bs]
            hint = m.c.table_hint(key, len(t.blocks))
            if len(chunk) == bs:
                rec = m.alloc_immutable(m.blocks.internal_key(), self.device, prev, chunk,
                                        self.extra_hash, hint)
            else:
                rec = m.alloc_mutable(m.blocks.internal_key(), self.device, prev,
                                      self.extra_hash, hint)
                m.extend(rec, chunk)
            t.blocks.append(rec.key)
            m.c.write(rec.key, hint, 0)
            prev = rec.key
        t.tokens += tuple(self.tokens)

    def explain_success(self, m: Model) -> None:
        key = m.c.outcome.new_table
        if key is None:
            return
        bs = m.bs
        chunks = tuple(self.tokens[i:i + bs] for i in range(0, len(self.tokens) - bs + 1, bs))
        shown = [(i, None) for i in m.c.after.tables.get(key, ())]
        common.check_served(m, None, chunks, self.extra_hash, self.device, shown)


@dataclass(frozen=True, slots=True)
class TableAppend(Op):
    """``append_token_ids(tokens, num_lookahead_slots=lookahead)`` with the table's extra_hash."""

    kind: ClassVar[str] = "table_append"
    amounts_to: ClassVar[str | None] = "append"
    malformed: ClassVar[Mapping[str, ArgSpec]] = {
        "tokens": (Arg.TOKENS, False), "lookahead": (Arg.COUNT, False),
        # the table's extra_hash, which its plan passes to the call (docs/API.md §12.1)
        "extra_hash": (Arg.EXTRA, False)}
    table: int
    tokens: Tokens
    lookahead: int = 0
    computed: int | None = None  # num_computed_slots (sliding-window tables); value: null id

    def misuse(self, m: Model) -> str | None:
        t = common.table(m, self.table)
        dead = common.damage(m, t)
        if dead:
            if self.computed is None and self.lookahead >= 0 and t.device is Dev.GPU:
                hit = [i for i in written_indices(m, t, len(self.tokens)) if i in dead]
                if hit:
                    return f"append into block {hit[0]} of table {t.key}, freed behind it"
            raise common.left_open(t, dead, self.kind)
        refused = _growable(m, t, self.kind)
        if refused is not None:
            return refused
        if self.lookahead < 0:
            raise Out("negative slot count")
        return self._window(m, t)

    def _window(self, m: Model, t: TableRec) -> str | None:
        """Sliding-window tables (see ``models.families.v0.window``)."""
        if self.computed is None:
            return None if t.window is None else \
                "sliding-window append without num_computed_slots"
        if t.window is None:
            raise Out("num_computed_slots for a table without a sliding window")
        if self.computed > len(t.tokens):
            # Computed slots beyond the tokens: refused when the window would drop every
            # block or a block the tokens are written into; other cases are left open.
            end = self.computed // m.bs - t.window
            if end >= len(t.blocks):
                return "num_computed_slots moves the window past the table's last block"
            if self.tokens and len(t.tokens) // m.bs < end:
                return "the window drops a block the tokens are written into"
            if end > 0 and t.blocks[end - 1] != NULL_KEY and \
                    len(m.blocks[t.blocks[end]].tokens) < m.bs:
                return "the window drops the predecessor of a block not yet full"
        if not 0 <= self.computed <= len(t.tokens):
            raise Out("num_computed_slots outside 0..the table's token count")
        return None

    def cost(self, m: Model) -> tuple[int, Dev]:
        """Net GPU ids taken: the null block (first use), new blocks and copies, less the ids
        the window drop gives back; the null block is taken first, so it alone needs a free
        id."""
        t = m.tables[self.table]
        new = new_blocks_needed(m, t, len(self.tokens) + self.lookahead)
        shared = sum(1 for i in written_indices(m, t, len(self.tokens))
                     if i < len(t.blocks) and m.shared(m.blocks[t.blocks[i]]))
        if t.window is None or self.computed is None:
            return new + shared, Dev.GPU
        null = needs_null(m, t)
        if null and m.pools[Dev.GPU].free < 1:
            return 1, Dev.GPU
        return null + new + shared - ids_returned(m, t, self.computed), Dev.GPU

    def step(self, m: Model) -> None:
        t = m.tables[self.table]
        if t.window is not None and self.computed is not None:
            take_null(m, m.c.outcome.value)
            drop(m, t, self.computed)
        total = len(t.tokens) + len(self.tokens)
        _ensure(m, t, len(self.tokens) + self.lookahead, total)
        pos = 0
        for index in written_indices(m, t, len(self.tokens)):
            rec = m.blocks[t.blocks[index]]
            room = m.bs - len(rec.tokens)
            chunk = self.tokens[pos:pos + room]
            pos += len(chunk)
            first = len(rec.tokens)
            hint = m.c.table_hint(t.key, index)
            m.append(rec, chunk, hint)
            m.c.write(rec.key, hint, first)
        t.tokens += tuple(self.tokens)

    def hides_choices(self, m: Model) -> bool:
        """New blocks that fill (and so may be promoted away) while the hashless pool is
        empty can hide an eviction victim (prefix caching only)."""
        if not (m.pc and self.tokens):
            return False
        t = m.tables[self.table]
        filled = (len(t.tokens) + len(self.tokens)) // m.bs - len(t.blocks)
        return filled > len(m.pools[Dev.GPU].hashless)


@dataclass(frozen=True, slots=True)
class TableEnsureSlots(Op):
    """``ensure_num_empty_slots(slots)``."""

    kind: ClassVar[str] = "table_ensure_slots"
    amounts_to: ClassVar[str | None] = "append"
    malformed: ClassVar[Mapping[str, ArgSpec]] = {
        "slots": (Arg.COUNT, False), "extra_hash": (Arg.EXTRA, False)}
    table: int
    slots: int

    def misuse(self, m: Model) -> str | None:
        t = common.table(m, self.table)
        common.left_open_if_damaged(m, t, self.kind)
        refused = _growable(m, t, self.kind)
        if refused is not None:
            return refused
        if self.slots < 0:
            raise Out("negative slot count")
        return None

    def cost(self, m: Model) -> tuple[int, Dev]:
        return new_blocks_needed(m, m.tables[self.table], self.slots), Dev.GPU

    def step(self, m: Model) -> None:
        t = m.tables[self.table]
        _ensure(m, t, self.slots, len(t.tokens))


@dataclass(frozen=True, slots=True)
class TableFork(Op):
    """``fork()``: a new table sharing every block."""

    kind: ClassVar[str] = "table_fork"
    amounts_to: ClassVar[str | None] = "fork"
    misuse_family: ClassVar[Invariant] = Family.RC
    crash_family: ClassVar[Invariant] = Family.TABLE  # forks of any length must work
    table: int

    def misuse(self, m: Model) -> str | None:
        t = common.table(m, self.table)
        dead = common.damage(m, t)
        if dead:
            return f"fork of table {t.key}, whose block {dead[0]} was freed behind it"
        return None if t.live else f"{self.kind} on freed table {self.table}"

    def step(self, m: Model) -> None:
        src = m.tables[self.table]
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


@dataclass(frozen=True, slots=True)
class TableFree(Op):
    """``free()``."""

    kind: ClassVar[str] = "table_free"
    amounts_to: ClassVar[str | None] = "free"
    misuse_family: ClassVar[Invariant] = Family.LEAK
    table: int

    def misuse(self, m: Model) -> str | None:
        t = common.table(m, self.table)
        dead = common.damage(m, t)
        if dead:
            return f"free of table {t.key}, whose block {dead[0]} was freed behind it"
        if not t.live:  # a freed table holds no blocks: upstream frees nothing
            raise Out(f"{self.kind} on freed (empty) table {self.table}")
        return None

    def step(self, m: Model) -> None:
        t = m.tables[self.table]
        held = [k for k in t.blocks if k != NULL_KEY]  # the allocator never frees the null block
        for k in held:
            m.free(m.blocks[k])
            m.c.write(k, None, None)
        m.c.forget.extend(held)  # dropped once the step is judged
        t.blocks = []
        t.live = False
        m.live_tables.discard(self.table)
        m.c.ended_tables.append(self.table)


@dataclass(frozen=True, slots=True)
class TableMarkAccessed(Op):
    """``mark_blocks_as_accessed(table.physical_block_ids, now)``."""

    kind: ClassVar[str] = "table_mark_accessed"
    amounts_to: ClassVar[str | None] = "mark_accessed"
    misuse_family: ClassVar[Invariant] = Family.LRU
    malformed: ClassVar[Mapping[str, ArgSpec]] = {"now": (Arg.TIME, True)}
    table: int
    now: float

    def misuse(self, m: Model) -> str | None:
        t = common.table(m, self.table)
        common.left_open_if_damaged(m, t, self.kind)
        if not t.live:  # a freed table holds no blocks: upstream marks nothing
            raise Out(f"{self.kind} on freed (empty) table {self.table}")
        return "mark_blocks_as_accessed with CPU blocks" if m.pc and t.device is Dev.CPU else None

    def step(self, m: Model) -> None:
        mark_ids(m, [m.blocks[k].id for k in m.tables[self.table].blocks], self.now)


@dataclass(frozen=True, slots=True)
class TableFreeBlock(Op):
    """``alloc.free(table.blocks[index])``: a legal free of a held block; the table keeps
    the (now id-less) object."""

    kind: ClassVar[str] = "table_free_block"
    amounts_to: ClassVar[str | None] = "free"
    misuse_family: ClassVar[Invariant] = Family.LEAK  # a second free of it is a double free
    table: int
    index: int

    def misuse(self, m: Model) -> str | None:
        t = common.table(m, self.table)
        if not t.live:
            raise Out(f"table {t.key} was freed")
        if t.window is not None:
            raise Out("a block of a sliding-window table (the window frees blocks itself)")
        if not 0 <= self.index < len(t.blocks):
            raise Out(f"table {t.key} has no block {self.index}")
        rec = m.blocks[t.blocks[self.index]]
        if rec.live:
            return None
        if m.blocks.reusable(rec):
            raise Out(f"block {self.index} of table {t.key} was freed and its object may "
                      "have been reused")
        return f"free of block {self.index} of table {t.key}, already freed behind it"

    def step(self, m: Model) -> None:
        t = m.tables[self.table]
        key = t.blocks[self.index]
        m.free(m.blocks[key])
        m.c.write(key, None, None)
        m.live_tables.discard(t.key)  # damaged: no longer a running sequence
        want = tuple(m.blocks[k].id if k != NULL_KEY else m.null_id for k in t.blocks)
        got = m.c.after.tables.get(t.key)
        if got != want:
            m.c.flag(Family.TABLE, f"table {t.key} after its block {self.index} was freed "
                     "behind it: ids (the freed one shows none)", expected=want, observed=got)
