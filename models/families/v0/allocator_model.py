"""The model of the allocator: its state and the primitive steps operations are made of.

:class:`Model` holds both devices' pools, every block record and every table record, and
applies the primitive steps (allocation, hits, copy-on-write, promotion, free, fork, swap)
the way the contract says they must happen; fresh ids follow the target (``fresh_ids``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

from models.families.v0 import fresh_ids
from models.families.v0.blocks import BlockRec, BlockStore, TableRec
from models.families.v0.capabilities import Config
from models.families.v0.content import ROOT, ContentTrie
from models.families.v0.context import Context
from models.families.v0.fresh_ids import ModelError
from models.families.v0.hash_ledger import HashLedger
from models.families.v0.invariants import Family
from models.families.v0.ops.values import Dev, Extra
from models.families.v0.pool import Pool
from models.families.v0.tracker_state import SeqState

F = Family


class Model:
    """One consistent state of the allocator as the contract describes it (a *world*)."""

    def __init__(self, config: Config, trie: ContentTrie) -> None:
        self.config = config
        self.caps = config.caps
        self.bs = config.block_size
        self.pc = config.caps.prefix_caching
        self.trie = trie
        self.refcount: dict[int, int] = {}
        gpu = range(0, config.num_gpu_blocks)
        cpu = range(config.num_gpu_blocks, config.num_gpu_blocks + config.num_cpu_blocks)
        self.pools = {Dev.GPU: Pool(Dev.GPU, gpu, trie, self.refcount),
                      Dev.CPU: Pool(Dev.CPU, cpu, trie, self.refcount)}
        self.blocks = BlockStore()
        self.handles: set[int] = set()  # live program block handles
        self.tables: dict[int, TableRec] = {}
        self.live_tables: set[int] = set()
        self.table_ids: dict[int, tuple[int | None, ...]] = {}  # refreshed by each table step
        self.null_id: int | None = None
        self.swap_log: dict[int, int] = {}  # src -> dst of swaps since get_and_reset_swaps
        self.hashes = HashLedger()  # what the target showed: shared by every clone
        self.seqs = SeqState()  # engine-side sequence trackers (models.families.v0.ops.trackers)
        self.ctx: Context | None = None

    def clone(self) -> Model:
        """An independent copy (the trie is shared: it only grows)."""
        other = copy.copy(self)
        other.refcount = dict(self.refcount)
        other.pools = {dev: pool.clone(other.refcount) for dev, pool in self.pools.items()}
        other.blocks = self.blocks.clone()
        other.handles = set(self.handles)
        other.tables = {k: t.clone() for k, t in self.tables.items()}
        other.live_tables = set(self.live_tables)
        other.table_ids = dict(self.table_ids)
        other.swap_log = dict(self.swap_log)
        other.seqs = self.seqs.clone()
        other.ctx = None
        return other

    def self_check(self) -> None:
        """The model's own LEAK/RC invariants (for tests of the model; O(everything)):
        each id in exactly one state, refcount = live holders, content map one-to-one."""
        holders: dict[int, int] = {}
        live = [r.id for r in self.blocks.recs.values() if r.live]
        for i in [*live, *([] if self.null_id is None else [self.null_id])]:
            if i is None:
                raise ModelError("a live block without an id")
            holders[i] = holders.get(i, 0) + 1
        for pool in self.pools.values():
            for i in pool.ids:
                states = (i in pool.hashless) + (i in pool.evictor) + pool.is_active(i)
                if states != 1 or self.refcount[i] != holders.get(i, 0):
                    raise ModelError(f"id {i}: {states} states, refcount {self.refcount[i]}, "
                                     f"{holders.get(i, 0)} holders")
                if (i in pool.evictor) and i not in pool.content_of:
                    raise ModelError(f"evictable id {i} is not cached")
            if {v: k for k, v in pool.content_of.items()} != pool.id_of:
                raise ModelError("content map is not one-to-one")
            if set(pool.accessed) != {i for i in pool.ids if pool.is_active(i)}:
                raise ModelError("trackers disagree with refcounts")

    # ------------------------------------------------------------------ helpers

    @property
    def c(self) -> Context:
        if self.ctx is None:
            raise ModelError("no step in progress")
        return self.ctx

    def pool_of(self, block_id: int) -> Pool | None:
        for pool in self.pools.values():
            if block_id in pool.ids:
                return pool
        return None

    def is_full(self, rec: BlockRec) -> bool:
        return len(rec.tokens) == self.bs

    def prefix_hashed(self, prev: int | None) -> bool:
        return prev is None or self.blocks[prev].content is not None

    def content_of(self, prev: int | None, tokens: Sequence[int], extra: Extra) -> int:
        """Content key of a full block of ``tokens`` after ``prev``."""
        start = ROOT if prev is None else self.blocks[prev].end
        node = start
        for tok in tokens:
            node = self.trie.step(node, tok, extra)
        return node

    # ------------------------------------------------------------------ fresh ids

    def fresh(self, dev: Dev, hint: int | None, *, may_hide: bool = False,
              content: int | None = None) -> int:
        return fresh_ids.fresh(self, dev, hint, may_hide=may_hide, content=content)

    # ------------------------------------------------------------------ block making

    def new_rec(self, key: int, dev: Dev, prev: int | None, extra: Extra) -> BlockRec:
        start = ROOT if prev is None else self.blocks[prev].end
        rec = self.blocks.add(BlockRec(key, dev, prev, extra, start))
        if key >= 0:
            self.handles.add(key)
        return rec

    def extend(self, rec: BlockRec, tokens: Iterable[int]) -> None:
        """Add tokens; a block's prefix identity is fixed by its first token (its predecessor
        is full by then, even if it was empty when this block was made)."""
        toks = list(tokens)
        if not rec.idents and toks:
            rec.start = ROOT if rec.prev is None else self.blocks[rec.prev].end
        rec.idents.extend(self.trie.walk(rec.end, toks, rec.extra))
        rec.tokens.extend(toks)

    def alloc_mutable(self, key: int, dev: Dev, prev: int | None, extra: Extra,
                      hint: int | None, *, may_hide: bool = False) -> BlockRec:
        rec = self.new_rec(key, dev, prev, extra)
        rec.id = self.fresh(dev, hint, may_hide=may_hide)
        return rec

    def immutable_id(self, dev: Dev, content: int, hint: int | None, *,
                     admission: bool = True) -> int:
        """The id a full block of ``content`` gets on ``dev``: a hit, or a fresh id cached
        under it. An ``admission`` records one cache query (prefix caching only); a swap-in
        re-registers a block the engine holds and records none (only upstream's counts)."""
        if not self.pc:
            return self.fresh(dev, hint)
        pool = self.pools[dev]
        cached = pool.id_of.get(content)
        pool.query(cached is not None, admission=admission)
        if cached is not None:
            pool.hit(cached)
            if hint is not None and hint != cached:
                self.c.flag(F.CACHE, f"content cached at id {cached} was not reused",
                            expected=cached, observed=hint)
            return cached
        chosen = self.fresh(dev, hint, content=content)
        pool.cache(chosen, content)
        return chosen

    def alloc_immutable(self, key: int, dev: Dev, prev: int | None, tokens: Sequence[int],
                        extra: Extra, hint: int | None) -> BlockRec:
        rec = self.new_rec(key, dev, prev, extra)
        self.extend(rec, tokens)
        if self.pc:
            rec.content = rec.end
        rec.id = self.immutable_id(dev, rec.end, hint)
        return rec

    # ------------------------------------------------------------------ writes

    def append(self, rec: BlockRec, tokens: Sequence[int], final_hint: int | None) -> None:
        """``append_token_ids``: copy-on-write if shared, then promotion once full."""
        pool = self.pools[rec.device]
        old = rec.id
        if old is None:
            raise ModelError(f"append to freed block {rec.key}")
        if not tokens and self.pc:
            return
        if pool.refcount[old] > 1:
            pool.release(old)
            hint = self.c.cows.get(old)
            if hint is None:
                back = [p for p in self.c.outcome.cows if p[1] == old]
                why = "recorded reversed" if back else "not recorded"
                self.c.flag(F.COW, f"write to shared id {old}: copy-on-write {why}",
                            expected=f"({old}, <fresh id>)", observed=self.c.outcome.cows)
            new = self.fresh(rec.device, hint)
            self.c.expected_cows.append((old, new))
            rec.id = new
        self.extend(rec, tokens)
        if self.pc and self.is_full(rec) and self.prefix_hashed(rec.prev):
            self.promote(rec, final_hint)

    def promote(self, rec: BlockRec, final_hint: int | None) -> None:
        pool = self.pools[rec.device]
        rec.content = rec.end
        own = rec.id
        if own is None:
            raise ModelError("promotion of a freed block")
        cached = pool.id_of.get(rec.content)
        if cached is not None and cached in pool.unwritten and final_hint != cached:
            # Nobody wrote that id's KV: the entry may give way to this block's own id. A move
            # onto it is just as permitted (revived uncomputed and touched, as a hit revives
            # it); the shadow memory flags it only when KV already computed into the block's
            # own id (its earlier tokens, before a mark) is left behind (CONTENT).
            pool.forget(cached)
            cached = None
        if cached is None:
            pool.cache(own, rec.content)
            if final_hint is not None and final_hint != own:
                fresh_ids.judge(self, pool, final_hint, rec.content)  # it kept another fresh id
            return
        pool.release(own)
        pool.hit(cached)
        rec.id = cached
        if final_hint is not None and final_hint != cached:
            self.c.flag(F.CACHE, f"a block filled with content cached at id {cached} was not "
                        "promoted onto it", expected=cached, observed=final_hint)

    def free(self, rec: BlockRec) -> None:
        if rec.id is None:
            raise ModelError(f"double free of {rec.key}")
        self.pools[rec.device].release(rec.id)
        self.blocks.kill(rec)
        self.handles.discard(rec.key)

    def fork(self, chain: Sequence[int], keys: Sequence[int]) -> list[BlockRec]:
        """New records sharing every id of ``chain``; ``keys`` name them."""
        out: list[BlockRec] = []
        prev: int | None = None
        for src_key, key in zip(chain, keys, strict=True):
            src = self.blocks[src_key]
            if src.id is None:
                raise ModelError(f"fork of freed block {src_key}")
            self.pools[src.device].incref(src.id)
            rec = self.new_rec(key, src.device, prev, src.extra)
            rec.start, rec.tokens, rec.idents = src.start, list(src.tokens), list(src.idents)
            rec.id, rec.content = src.id, src.content
            out.append(rec)
            prev = key
        return out

    def swap(self, recs: Sequence[BlockRec], src: Dev, dst: Dev,
             hints: Sequence[int | None]) -> list[list[int]]:
        """``swap_out`` on ``src`` then ``swap_in`` on ``dst``; the ``{src: dst}`` mapping.
        No cache query is recorded: hit-rate counters count admissions only (upstream's
        counts, which a tolerated ``swap_in_queries`` accepts, count them)."""
        old_ids: list[int] = []
        for rec in recs:
            if rec.id is None:
                raise ModelError(f"swap of freed block {rec.key}")
            old_ids.append(rec.id)
            self.pools[src].release(rec.id)
        mapping: dict[int, int] = {}
        for rec, old, hint in zip(recs, old_ids, hints, strict=True):
            if rec.content is not None:
                rec.id = self.immutable_id(dst, rec.content, hint, admission=False)
            else:
                rec.id = self.fresh(dst, hint)
            rec.device = dst
            mapping[old] = rec.id
        self.swap_log.update(mapping)
        return [[s, d] for s, d in mapping.items()]

    # ------------------------------------------------------------------ costs

    def chain_cost(self, dev: Dev, contents: Iterable[int]) -> int:
        """Fresh ids a run of full blocks needs: those not hitting an active cached id."""
        pool = self.pools[dev]
        if not self.pc:
            return sum(1 for _ in contents)
        return sum(1 for c in set(contents) if not pool.cached_active(c))

    def swap_cost(self, recs: Sequence[BlockRec], dst: Dev) -> int:
        full = [r.content for r in recs if r.content is not None]
        return len(recs) - len(full) + self.chain_cost(dst, (c for c in full if c is not None))

    def shared(self, rec: BlockRec) -> bool:
        return rec.id is not None and self.refcount[rec.id] > 1

