"""The engine-side operations: what an engine's block manager asks besides the allocator
calls (``ENGINE_OPS``): the common computed prefix of a batch, bursts of cache queries (the
hit-rate window), and the per-sequence trackers of ``prefix_caching_block`` (one entry per
table: the table handle is the seq_id; state in ``models.families.v0.tracker_state``).

- ``CommonComputedIds``: the longest common prefix of the id lists (upstream quirks: one list
  is returned as is; empty lists are ignored; all empty gives ``""``). Naive: ``[]``.
- ``HitBurst``: every request hits content that is cached and held, so only the hit-rate
  counters move (``count`` queries, ``count`` hits); block objects were made and dropped.
- Trackers: ``get_num_cached_tokens`` = block size x the leading run of the table's full-block
  contents that are cached on the GPU and computed, frozen at its last value while in
  prefill; ``get_cached_computed_blocks_and_update`` extends the remembered list with the
  leading run of computed ids of the table's blocks (last one skipped; no holes), and once
  that run stops short (a gap) returns it unchanged; ``update_seq_blocks_last_access`` stamps
  exactly the table's ids with the last access time.

Contract (``misuse``): a question about a table freed behind its back is left open
(``models.families.v0.table_misuse``), as is one about a table whose window dropped blocks;
then each operation's own ``contract``. Misuse, refused with a typed error before anything
changes: adding a sequence the last-access tracker already holds, and removing, stamping or
asking about one a tracker does not hold (the first tracker call of the plan raises).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from models.core.invariants import Invariant
from models.families.v0.content import ROOT
from models.families.v0.invariants import Family
from models.families.v0.ops.base import Op, Out
from models.families.v0.ops.marks import mark_ids
from models.families.v0.ops.queries import computed_prefix
from models.families.v0.ops.values import Dev, Extra, ExtraKey
from models.families.v0.table_misuse import engine_left_open
from models.families.v0.tracker_state import SeqEntry
from models.families.v0.window import holds_null

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model
    from models.families.v0.blocks import TableRec

F = Family


class NotTracked(Exception):
    """The sequence is not in the tracker the operation asks first (misuse)."""


@dataclass(frozen=True, slots=True)
class EngineOp(Op):
    """Base of the engine-side operations: :meth:`misuse` runs the table checks every one of
    them shares (:meth:`table_left_open`), then its own :meth:`contract`."""

    def misuse(self, m: Model) -> str | None:
        self.table_left_open(m)
        try:
            return self.contract(m)
        except NotTracked as why:
            return str(why)

    def table_left_open(self, m: Model) -> None:
        """Raises :class:`Out` when the table asked about is one the contract leaves open."""

    def contract(self, m: Model) -> str | None:
        """The operation's own contract: the misuse (or raises :class:`NotTracked`, misuse
        too), None if valid; raises :class:`Out`."""
        return None


@dataclass(frozen=True, slots=True)
class SeqOp(EngineOp):
    """An engine-side operation on one sequence (``table``: its table handle)."""

    #: It reads the table's blocks: on a table freed behind its back it is left open
    #: (tracker bookkeeping that reads no block is judged as usual).
    reads_blocks: ClassVar[bool] = True
    table: int

    def table_left_open(self, m: Model) -> None:
        key = self.table
        if self.reads_blocks and isinstance(key, int) and key in m.tables:
            engine_left_open(m, m.tables[key], self.kind)
        if key in m.tables and holds_null(m.tables[key]):
            # a sequence holds every token, its windowed table only the window's blocks.
            raise Out("engine-side question about a table whose window dropped blocks")

    def seq_table(self, m: Model, *, live: bool = True) -> TableRec:
        """The sequence's table (live unless ``live`` is False)."""
        key = self.table
        if not isinstance(key, int) or key not in m.tables:
            raise Out(f"table handle {key} never existed")
        t = m.tables[key]
        if live and not t.live:
            raise Out(f"table {key} was freed")
        return t

    def entry(self, m: Model, t: TableRec) -> SeqEntry:
        """The sequence's tracker entry; :class:`NotTracked` if the last-access tracker does
        not hold it."""
        if not m.seqs.started:
            raise Out("the trackers were not created")
        e = m.seqs.entries.get(t.key)
        if e is None or not e.access:
            raise NotTracked(f"{self.kind}: sequence {t.key} is not tracked")
        return e


def _on_gpu_ids(t: TableRec) -> None:
    if t.device is not Dev.GPU:
        raise Out("the table's ids are CPU ids (the trackers ask the GPU allocator)")
    if getattr(t, "window", None) is not None:
        raise Out("sliding-window table")


# --------------------------------------------------------------------------- batch questions


@dataclass(frozen=True, slots=True)
class CommonComputedIds(EngineOp):
    """``get_common_computed_block_ids([[ids of blocks] for blocks in lists])``; value: the
    list, or ``""`` (upstream's ``commonprefix`` of nothing) when every list is empty."""

    kind: ClassVar[str] = "common_computed_ids"
    mutates: ClassVar[bool] = False
    lists: tuple[tuple[int, ...], ...]

    def contract(self, m: Model) -> str | None:
        if not self.lists:
            raise Out("no sequences")
        for h in (h for lst in self.lists for h in lst):
            if h not in m.handles:
                raise Out(f"block handle {h} is not live")
        return None

    def step(self, m: Model) -> None:
        lists = [[m.blocks[h].id for h in lst] for lst in self.lists]
        want: Any
        if not m.pc:
            want = []
        elif len(lists) == 1:
            want = lists[0]
        else:
            nonempty = [lst for lst in lists if lst]
            if not nonempty:
                want = ""
            else:
                n = min(len(lst) for lst in nonempty)
                first = nonempty[0]
                for lst in nonempty[1:]:
                    n = next((i for i in range(n) if lst[i] != first[i]), n)
                want = first[:n]
        got = m.c.outcome.value
        if got != want or type(got) is not type(want):
            m.c.flag(F.COMPUTED, "get_common_computed_block_ids: the common prefix of the lists",
                     expected=want, observed=got)


@dataclass(frozen=True, slots=True)
class HitBurst(EngineOp):
    """``count`` times ``allocate_immutable_block(block.prev_block, block.token_ids, device,
    extra_hash)`` then ``free`` of the new block: ``count`` cache queries on ``block``'s
    content (cached and held, so every one is a hit and nothing else changes)."""

    kind: ClassVar[str] = "hit_burst"
    # A burst takes and drops references to a held id: a typed error from it means the
    # target counts that id's references wrong (e.g. it sits in the evictor while held).
    misuse_family: ClassVar[Invariant] = Family.RC
    block: int
    count: int
    device: Dev = Dev.GPU
    extra_hash: Extra = None

    def contract(self, m: Model) -> str | None:
        rec = m.blocks[self.block] if self.block in m.handles else None
        if rec is None or not m.pc or rec.content is None or self.count < 0:
            raise Out("needs a live hashed block of a prefix-caching target")
        if rec.prev is not None and not m.blocks[rec.prev].live:
            raise Out("the block's predecessor was freed")
        if rec.device is not self.device or rec.extra != self.extra_hash:
            raise Out("device or extra key differ from the block's")
        if self.extra_hash is not None and not (m.caps.extra_keys and m.caps.vllm_api):
            raise Out("extra_hash given to a target without extra keys")
        if isinstance(self.extra_hash, ExtraKey) \
                and not self.extra_hash.fields_used <= m.caps.extra_key_fields:
            raise Out("extra key fields beyond the target's")
        if not m.pools[self.device].cached_active(rec.content):
            raise Out("the content is not cached and held (a request could miss)")
        return None

    def step(self, m: Model) -> None:
        pool = m.pools[self.device]
        pool.query(True, self.count)
        m.blocks.made += self.count  # each request made a block object and dropped it


# --------------------------------------------------------------------------- trackers


@dataclass(frozen=True, slots=True)
class TrackerStart(EngineOp):
    """The engine's trackers: ``ComputedBlocksTracker(alloc[, block_size, True])`` and
    ``LastAccessBlocksTracker(alloc)``."""

    kind: ClassVar[str] = "tracker_start"
    amounts_to: ClassVar[str | None] = ""

    def step(self, m: Model) -> None:
        m.seqs.started = True
        m.seqs.entries.clear()


@dataclass(frozen=True, slots=True)
class SeqTrack(SeqOp):
    """``add_seq(table)`` on the last-access tracker (and the Aphrodite computed tracker)."""

    kind: ClassVar[str] = "seq_track"
    amounts_to: ClassVar[str | None] = ""

    def contract(self, m: Model) -> str | None:
        t = self.seq_table(m)
        if not m.seqs.started:
            raise Out("the trackers were not created")
        e = m.seqs.entries.get(t.key)
        if e is not None and not e.access:
            # the last-access tracker would take it, the computed tracker refuse it: the
            # failure would come half way through.
            raise Out(f"sequence {t.key} is still in the computed tracker")
        e = m.seqs.entries.get(self.table)
        if e is not None and e.access:
            return f"seq_track: sequence {self.table} is already tracked"
        return None

    def step(self, m: Model) -> None:
        m.seqs.entries[self.table] = SeqEntry(access=True,
                                              computed=[] if m.caps.aphrodite_api else None)


@dataclass(frozen=True, slots=True)
class SeqUntrack(SeqOp):
    """``remove_seq(table)`` on the last-access tracker, and on the computed tracker if
    ``computed`` (it holds an entry for the table)."""

    kind: ClassVar[str] = "seq_untrack"
    amounts_to: ClassVar[str | None] = ""
    reads_blocks: ClassVar[bool] = False
    computed: bool = True

    def contract(self, m: Model) -> str | None:
        e = self.entry(m, self.seq_table(m, live=False))
        if self.computed and e.computed is None and e.frozen is None:
            raise Out("the computed tracker has no entry for it")
        return None

    def step(self, m: Model) -> None:
        e = m.seqs.entries[self.table]
        e.access, e.last = False, None
        if self.computed:
            e.computed, e.gap, e.frozen = None, False, None
        if e.empty:
            del m.seqs.entries[self.table]


def full_block_contents(m: Model, t: TableRec) -> list[int]:
    """Content keys of the table's full blocks, from its tokens and extra key."""
    out, node = [], ROOT
    for i in range(len(t.tokens) // m.bs):
        for tok in t.tokens[i * m.bs:(i + 1) * m.bs]:
            node = m.trie.step(node, tok, t.extra)
        out.append(node)
    return out


@dataclass(frozen=True, slots=True)
class SeqCachedTokens(SeqOp):
    """vLLM ``get_num_cached_tokens(seq)`` for a sequence with the table's tokens and
    extra_hash; value: int (frozen while ``prefill``)."""

    kind: ClassVar[str] = "seq_cached_tokens"
    prefill: bool = True

    def contract(self, m: Model) -> str | None:
        if not m.caps.vllm_api:
            raise Out("get_num_cached_tokens is vLLM-generation only")
        try:
            self.entry(m, self.seq_table(m))
        except NotTracked:  # the vLLM tracker starts an entry on demand
            raise Out("sequence not tracked") from None
        return None

    def step(self, m: Model) -> None:
        e = m.seqs.entries[self.table]
        note = ""
        if e.frozen is not None and self.prefill:
            want = e.frozen
        else:
            gpu = m.pools[Dev.GPU]
            n = 0
            for content in full_block_contents(m, m.tables[self.table]) if m.pc else ():
                cached = gpu.id_of.get(content)
                if cached is None or not gpu.is_computed(cached):
                    note = gpu.why_uncomputed(cached)
                    break
                n += 1
            want = n * m.bs
        frozen = e.frozen is not None and self.prefill
        e.frozen = want
        got = m.c.outcome.value
        if got != want:
            why = " (frozen during prefill)" if frozen else note
            m.c.flag(F.COMPUTED, f"get_num_cached_tokens{why}", expected=want, observed=got)


@dataclass(frozen=True, slots=True)
class SeqComputedIds(SeqOp):
    """Aphrodite ``get_cached_computed_blocks_and_update(table, table.physical_block_ids)``;
    value: list of ids."""

    kind: ClassVar[str] = "seq_computed_ids"

    def contract(self, m: Model) -> str | None:
        t = self.seq_table(m, live=False)
        _on_gpu_ids(t)
        if not m.caps.aphrodite_api:
            raise Out("get_cached_computed_blocks_and_update is Aphrodite-generation only")
        if not m.seqs.started:
            raise Out("the trackers were not created")
        e = m.seqs.entries.get(t.key)
        if e is None or e.computed is None:
            raise NotTracked(f"{self.kind}: sequence {t.key} is not in the computed tracker")
        # stale ids: only the computed tracker is asked; a finished (freed) sequence it still
        # holds has no blocks, which a list without a gap cannot be extended from.
        if not t.live:
            if e.gap:
                raise Out("a freed table whose list has a gap (returned as is)")
            raise NotTracked(f"{self.kind}: sequence {t.key} has no blocks (its table was "
                             "freed)")
        # end stale ids
        if e.computed is None or not t.blocks:
            raise Out("needs an Aphrodite computed-tracker entry and a block")
        if not e.gap and len(e.computed) > len(t.blocks) - 1:
            raise Out("the sequence lost blocks since the last call")
        return None

    def step(self, m: Model) -> None:
        e = m.seqs.entries[self.table]
        ids = [m.blocks[k].id for k in m.tables[self.table].blocks]
        n = len(ids) - 1
        note = ""
        if e.computed is None:  # not reached: the contract check requires the entry
            return
        if not e.gap and len(e.computed) < n:
            gpu = m.pools[Dev.GPU]
            if m.pc:
                e.computed = e.computed + computed_prefix(gpu, ids[len(e.computed):n])
                if len(e.computed) < n:
                    note = gpu.why_uncomputed(ids[len(e.computed)])
            else:
                e.computed = []
            e.gap = len(e.computed) < n
        got = m.c.outcome.value
        if got != e.computed:
            m.c.flag(F.COMPUTED, f"get_cached_computed_blocks_and_update{note}",
                     expected=e.computed, observed=got)


@dataclass(frozen=True, slots=True)
class SeqAccess(SeqOp):
    """``update_last_access(table, now)``."""

    kind: ClassVar[str] = "seq_access"
    amounts_to: ClassVar[str | None] = ""
    reads_blocks: ClassVar[bool] = False
    now: float

    def contract(self, m: Model) -> str | None:
        self.entry(m, self.seq_table(m, live=False))
        if self.now < 0:
            raise Out("negative time")
        return None

    def step(self, m: Model) -> None:
        m.seqs.entries[self.table].last = self.now


@dataclass(frozen=True, slots=True)
class SeqStampBlocks(SeqOp):
    """``update_seq_blocks_last_access(table, table.physical_block_ids)``."""

    kind: ClassVar[str] = "seq_stamp_blocks"
    amounts_to: ClassVar[str | None] = "mark_accessed"

    def contract(self, m: Model) -> str | None:
        t = self.seq_table(m)
        self.entry(m, t)
        if m.pc:
            _on_gpu_ids(t)
        return None

    def step(self, m: Model) -> None:
        last = m.seqs.entries[self.table].last
        if last is not None:
            mark_ids(m, [m.blocks[k].id for k in m.tables[self.table].blocks], last)


ENGINE_OPS: tuple[type[Op], ...] = (
    CommonComputedIds,
    HitBurst,
    TrackerStart,
    SeqTrack,
    SeqUntrack,
    SeqCachedTokens,
    SeqComputedIds,
    SeqAccess,
    SeqStampBlocks,
)
