"""Judging a snapshot against the model, after the step functions ran.

Free counts (FREE, or LEAK when the difference is not explained by the evictor), every live
handle's id and tokens and every table's ids and tokens (TABLE; LEAK for an id outside its
device or shared by two model ids; SWAP for the wrong device right after a swap), hashes
(CACHE: present iff the block is hashed; HASH: equal hash iff equal content across live
handles), and, when the adapter can introspect, the cached and evictable sets (CACHE), every
refcount (RC), each evictable id's rank inputs as its evictor's metadata shows them and each
active id's access time as its tracker shows it (LRU); each table block's
``num_tokens_total`` against its chain depth (TABLE, where the target's blocks expose it); the
hit-rate window fields where the target shows them (HIT, ``models.families.v0.hit_window``).
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core.invariants import FREE_COUNT_ERROR, Measure
from models.families.v0.allocator_model import Model
from models.families.v0.blocks import BlockRec
from models.families.v0.context import Context
from models.families.v0.hit_window import FIELDS as WINDOW_FIELDS
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev
from models.families.v0.ops.values import KeyIdentity
from models.families.v0.window import NULL_KEY, visible_tokens

F = Family


def check_snapshot(m: Model, c: Context) -> None:
    for t in (getattr(c.op, "table", None), c.outcome.new_table):
        if t in m.tables:  # only the step's own tables can have changed ids
            recs = m.blocks.recs
            m.table_ids[t] = tuple(recs[k].id for k in m.tables[t].blocks)
    _free(m, c)
    if not _ids_match(m, c):  # rare: classify every difference, with the owners of each id
        owners: dict[int, int] = {} if m.null_id is None else {m.null_id: m.null_id}
        _blocks_ids(m, c, owners)
        _tables_ids(m, c, owners)
    _blocks(m, c)
    _block_extras(m, c)
    _block_totals(m, c)
    _tables(m, c)
    _table_totals(m, c)
    _introspection(m, c)
    _hit_windows(m, c)
    _dropped(m, c)


def _dropped(m: Model, c: Context) -> None:
    """A block object a table let go of (freed with the table, or dropped from a window)
    keeps no id (TABLE): one still showing the id it had passes ``free``'s held-id check
    once that id is reused, so a stale handle frees another sequence's block. The null block
    keeps its id."""
    stale = [i for i in c.after.dropped_ids if i != m.null_id]
    if stale:
        c.flag(F.TABLE, "block objects the tables let go of still show ids", expected="None",
               observed=stale)


def _block_totals(m: Model, c: Context) -> None:
    """``num_tokens_total`` (docs/API.md §3; the evictor ranks by it) is the number of tokens of
    the block's chain up to and including it. Predecessors are full when a block is chained
    to them and stay unchanged, so the stored value is also the live one."""
    shown = c.after.block_totals
    if shown is None:
        return
    blocks = m.blocks.recs  # the store's dict: the hot loops skip its __getitem__
    totals: dict[int, int] = {}  # handle -> its chain's token count (each chain walked once)
    for h in m.handles:
        walk: list[int] = []
        k: int | None = h
        while k is not None and k not in totals:
            walk.append(k)
            k = blocks[k].prev
        total = 0 if k is None else totals[k]
        for j in reversed(walk):
            total += len(blocks[j].tokens)
            totals[j] = total
        got = shown.get(h)
        if got != totals[h]:
            c.flag(F.TABLE, f"block {h}: num_tokens_total", expected=totals[h], observed=got)


def _table_totals(m: Model, c: Context) -> None:
    """Each block of a live table shows as ``num_tokens_total`` (docs/API.md §3) the depth of its
    chain's content: the tokens of the whole prefix up to and including it, a sliding window's
    dropped blocks included (docs/CONTRACT.md: a fork's blocks count what the parent's do). TABLE,
    like the handles' totals (:func:`_block_totals`): the evictor ranks an id by the value its
    last freed handle shows, so a wrong one surfaces as LRU only in a rare eviction order.
    Checked only for the tables the target shows it for, and only for blocks holding tokens:
    the null block has none, and an empty lookahead block's total is not settled until it
    takes its first token (made before its predecessor filled, it keeps its creation-time
    value; vLLM 0.8's fork recomputes it from the chain, so parent and child differ)."""
    shown = c.after.table_totals
    if shown is None or not m.pc:
        return
    blocks, depth = m.blocks, m.trie.depth
    for t in m.live_tables:
        got = shown.get(t)
        if got is None:
            continue
        keys = m.tables[t].blocks
        if len(got) != len(keys):
            continue  # a different length is reported by the ids check
        for i, key in enumerate(keys):
            rec = blocks[key]
            if key == NULL_KEY or not rec.tokens:
                continue
            want = depth(rec.end)
            if got[i] != want:
                c.flag(F.TABLE, f"table {t}[{i}]: num_tokens_total", expected=want,
                       observed=got[i])


def _block_extras(m: Model, c: Context) -> None:
    """``Block.extra_hash`` (docs/API.md, vLLM generation) is the extra hash the
    handle was allocated with (forks inherit it); a request key shows as the engine's value
    for it (which the model does not compute: the same for every handle of that key); blocks
    of an allocator without prefix caching show ``None``."""
    shown = c.after.block_extras
    if shown is None:
        return
    by_key: dict[KeyIdentity | None, tuple[int, int | None]] = {}
    recs, caching = m.blocks.recs, m.caps.prefix_caching
    for h in m.handles:
        extra = recs[h].extra if caching else None
        got = shown.get(h)
        if extra is None or isinstance(extra, int):
            if got != extra:
                c.flag(F.HASH, f"block {h}: extra_hash", expected=extra, observed=got)
        elif by_key.setdefault(extra.identity(), (h, got))[1] != got:
            first, want = by_key[extra.identity()]
            c.flag(F.HASH, f"block {h}: extra_hash differs from block {first}'s, same key",
                   expected=want, observed=got)


def _hit_windows(m: Model, c: Context) -> None:
    """The ``metric_data`` window fields a target shows follow the model's queries (HIT)."""
    shown = c.after.metric
    if shown is None or not m.pc:
        return
    for dev, pool in m.pools.items():
        got = shown.get(dev)
        if got is not None and not pool.window_shown(got, m.caps.tolerated):
            c.flag(F.HIT, f"hit-rate window fields on {dev.value} ({', '.join(WINDOW_FIELDS)})",
                   expected=pool.window.fields(), observed=got)


def _table_ids(m: Model, t: int) -> tuple[int | None, ...]:
    return m.table_ids[t]


def _ids_match(m: Model, c: Context) -> bool:
    """Fast path: every live handle and table shows exactly the model's ids."""
    blocks, recs = c.after.blocks, m.blocks.recs
    for h in m.handles:
        if blocks.get(h, "missing") != recs[h].id:
            return False
    tables, table_ids = c.after.tables, m.table_ids
    return all(tables.get(t) == table_ids[t] for t in m.live_tables)


def _free(m: Model, c: Context) -> None:
    for dev, pool in m.pools.items():
        got = c.after.free.get(dev)
        if got == pool.free:
            continue
        ev = len(pool.evictor)
        family = F.FREE
        if isinstance(got, int) and (not ev or abs(got - pool.free) != ev):
            family = F.LEAK  # not an evictor miscount: ids lost or duplicated
        error = Measure(FREE_COUNT_ERROR, abs(got - pool.free)) if isinstance(got, int) else None
        c.flag(family, f"free count on {dev.value} (hashless {len(pool.hashless)} + "
               f"evictable {ev})", expected=pool.free, observed=got, measure=error)


def _check_id(m: Model, c: Context, rec: BlockRec, got: object, where: str,
              owners: dict[int, int]) -> None:
    want = rec.id
    if got == want:
        if want is not None:
            owners.setdefault(want, want)
        return
    if not isinstance(got, int) or want is None:
        c.flag(F.TABLE, f"{where}: id", expected=want, observed=got)
        return
    pool = m.pools[rec.device]
    if got not in pool.ids:
        other = m.pool_of(got)
        family = F.SWAP if c.swapping and other is not None else F.LEAK
        c.flag(family, f"{where}: id {got} is not a {rec.device.value} id", expected=want,
               observed=got)
        return
    first = owners.setdefault(got, want)
    if first != want:
        if rec.content is not None:  # a full block placed on another content's id
            c.flag(F.CONTENT, f"{where}: shares id {got} with different content", expected=want,
                   observed=got)
        else:
            c.flag(F.LEAK, f"{where}: id {got} handed to two owners (model ids {first} and "
                   f"{want})", expected=want, observed=got, root_cause=True)
        return
    c.flag(F.TABLE, f"{where}: id", expected=want, observed=got)


def _blocks_ids(m: Model, c: Context, owners: dict[int, int]) -> None:
    for h in sorted(m.handles):
        _check_id(m, c, m.blocks[h], c.after.blocks.get(h, "missing"), f"block {h}", owners)


def _tables_ids(m: Model, c: Context, owners: dict[int, int]) -> None:
    for t in sorted(m.live_tables):
        got, want = c.after.tables.get(t), _table_ids(m, t)
        if got is None or len(got) != len(want):
            c.flag(F.TABLE, f"table {t}: ids", expected=want, observed=got)
            continue
        for i, key in enumerate(m.tables[t].blocks):
            _check_id(m, c, m.blocks[key], got[i], f"table {t}[{i}]", owners)


def _blocks(m: Model, c: Context) -> None:
    after = c.after
    for h in c.ended_blocks:
        got = after.blocks.get(h, "missing")
        if got is not None:
            c.flag(F.TABLE, f"freed block {h} still shows an id", expected=None, observed=got)
    recs = m.blocks.recs
    for h in m.handles:
        rec = recs[h]
        tokens = after.block_tokens.get(h)
        if tokens != tuple(rec.tokens):
            c.flag(F.TABLE, f"block {h}: tokens", expected=tuple(rec.tokens), observed=tokens)
            continue  # its hash says nothing about the content the model knows
        hv = after.block_hashes.get(h)
        if (hv is None) != (rec.content is None):
            what = "hashed although not hashable (not full, or unhashed prefix)" \
                if rec.content is None else "full block with hashed prefix has no hash"
            c.flag(F.CACHE, f"block {h}: {what}", expected=rec.content is not None,
                   observed=hv)
        elif hv is not None and rec.content is not None:
            m.hashes.check(c, f"block {h}", rec.content, hv)


def _tables(m: Model, c: Context) -> None:
    after = c.after
    for t in c.ended_tables:
        got = after.tables.get(t)
        if got is None or any(i is not None for i in got):
            c.flag(F.TABLE, f"freed table {t} still shows ids", expected=(), observed=got)
    for t in m.live_tables:
        want = visible_tokens(m, m.tables[t])  # a sliding window hides dropped blocks
        tokens = after.table_tokens.get(t)
        if tokens != want:
            c.flag(F.TABLE, f"table {t}: tokens", expected=want, observed=tokens)


def _evictable_ranks(m: Model, shown: Mapping[Dev, Mapping[int, tuple[object, object]]],
                     c: Context) -> None:
    """Each evictable id's rank inputs as its evictor's metadata shows them (LRU): the access
    time its last holder had (the id's, not a block object's) and the token depth of its
    content. A wrong input decides an eviction only when pressure meets the right candidates;
    here it shows the step it is filed."""
    for dev, pool in m.pools.items():
        got = shown.get(dev)
        if not got:
            continue
        evictor = pool.evictor
        for block_id, (last, tokens) in got.items():
            if block_id not in evictor:
                continue  # a membership difference is CACHE's (above)
            want_last, neg_tokens = evictor.rank(block_id)
            if last != want_last or tokens != -neg_tokens:
                c.flag(F.LRU, f"evictable id {block_id} on {dev.value}: (last_accessed, "
                       "num_hashed_tokens) in the evictor", expected=(want_last, -neg_tokens),
                       observed=(last, tokens))


def _access_times(m: Model, shown: Mapping[Dev, Mapping[int, object]], c: Context) -> None:
    """Each active id's access time as its tracker shows it (LRU): the last mark's (docs/API.md:
    ``mark_blocks_as_accessed`` stamps every id it is given), which the id carries into the
    evictor when its last holder lets go. A mark that misses an id shows here at once."""
    for dev, pool in m.pools.items():
        got = shown.get(dev)
        if got is None:
            continue
        for block_id, want in pool.accessed.items():
            last = got.get(block_id)
            if last is not None and last != want:
                c.flag(F.LRU, f"active id {block_id} on {dev.value}: its tracker's "
                       "last_accessed", expected=want, observed=last)


def _introspection(m: Model, c: Context) -> None:
    after = c.after
    for dev, pool in m.pools.items():
        # Set-like key views compare with the shown sets without copying either side.
        if after.cached is not None:
            got = after.cached.get(dev, frozenset())
            if got != pool.content_of.keys():
                c.flag(F.CACHE, f"cached ids on {dev.value}", expected=sorted(pool.content_of),
                       observed=sorted(got))
        if after.evictable is not None:
            got = after.evictable.get(dev, frozenset())
            if got != pool.evictor.ids():
                c.flag(F.CACHE, f"evictable ids on {dev.value}", expected=sorted(pool.evictor),
                       observed=sorted(got))
    if after.evictable_ranks is not None and m.caps.lru:
        _evictable_ranks(m, after.evictable_ranks, c)
    if after.access_times is not None and m.caps.lru:
        _access_times(m, after.access_times, c)
    if after.refcounts is not None and after.refcounts != m.refcount:
        diff = {i: (m.refcount.get(i), after.refcounts.get(i))
                for i in sorted(set(m.refcount) | set(after.refcounts))
                if m.refcount.get(i) != after.refcounts.get(i)}
        c.flag(F.RC, "refcounts (id: (model, target))", expected="equal", observed=diff)
