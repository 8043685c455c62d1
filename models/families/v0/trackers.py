"""Semantics of the engine-side operations (``ENGINE_OPS`` in ``models.families.v0.operations``).

- ``CommonComputedIds``: the longest common prefix of the id lists (upstream quirks: one list
  is returned as is; empty lists are ignored; all empty gives ``""``). Naive: ``[]``.
- ``HitBurst``: every request hits content that is cached and held, so only the hit-rate
  counters move (``count`` queries, ``count`` hits); block objects were made and dropped.
- Trackers (one entry per table handle, see ``models.families.v0.tracker_state``):
  ``get_num_cached_tokens`` = block size x the leading run of the table's full-block contents
  that are cached on the GPU and computed, frozen at its last value while in prefill;
  ``get_cached_computed_blocks_and_update`` extends the remembered list with the leading run
  of computed ids of the table's blocks (last one skipped; no holes), and once that run
  stops short (a gap) returns it unchanged;
  ``update_seq_blocks_last_access`` stamps exactly the table's ids with the last access time.

``engine_check`` is the contract (raises :class:`OutOfContract`). Misuse, refused with a
typed error before anything changes: adding a sequence the last-access tracker already holds,
and removing, stamping or asking about one a tracker does not hold (the first tracker call of
the plan raises).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.core.invariants import Family
from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.blocks import TableRec
from models.families.v0.content import ROOT
from models.families.v0.contract import OutOfContract
from models.families.v0.operations import Dev, Op
from models.families.v0.ops.marks import mark_ids
from models.families.v0.ops.queries import computed_prefix
from models.families.v0.tracker_state import SeqEntry

F = Family


def _out(op: Op, why: str) -> OutOfContract:
    return OutOfContract(f"{op.kind}: {why}")


def _table(m: Model, op: Op, *, live: bool = True) -> TableRec:
    key = getattr(op, "table", None)
    if not isinstance(key, int) or key not in m.tables:
        raise _out(op, f"table handle {key} never existed")
    t = m.tables[key]
    if live and not t.live:
        raise _out(op, f"table {key} was freed")
    return t


class _NotTracked(Exception):
    """The sequence is not in the tracker the operation asks first (misuse)."""


def _entry(m: Model, op: Op, t: TableRec) -> SeqEntry:
    if not m.seqs.started:
        raise _out(op, "the trackers were not created")
    e = m.seqs.entries.get(t.key)
    if e is None or not e.access:
        raise _NotTracked(f"{op.kind}: sequence {t.key} is not tracked")
    return e


def engine_check(m: Model, op: Op) -> str | None:
    """The misuse in ``op`` (None if it is valid); raises :class:`OutOfContract` unless
    ``op`` may be asked now."""
    try:
        _engine_check(m, op)
    except _NotTracked as why:
        return str(why)
    if isinstance(op, ops.SeqTrack):
        e = m.seqs.entries.get(op.table)
        if e is not None and e.access:
            return f"seq_track: sequence {op.table} is already tracked"
    return None


def _on_gpu_ids(m: Model, op: Op, t: TableRec) -> None:
    if t.device is not Dev.GPU:
        raise _out(op, "the table's ids are CPU ids (the trackers ask the GPU allocator)")
    if getattr(t, "window", None) is not None:
        raise _out(op, "sliding-window table")


def _engine_check(m: Model, op: Op) -> None:
    if isinstance(op, ops.CommonComputedIds):
        if not op.lists:
            raise _out(op, "no sequences")
        for h in (h for lst in op.lists for h in lst):
            if h not in m.handles:
                raise _out(op, f"block handle {h} is not live")
        return
    if isinstance(op, ops.HitBurst):
        rec = m.blocks[op.block] if op.block in m.handles else None
        if rec is None or not m.pc or rec.content is None or op.count < 0:
            raise _out(op, "needs a live hashed block of a prefix-caching target")
        if rec.prev is not None and not m.blocks[rec.prev].live:
            raise _out(op, "the block's predecessor was freed")
        if rec.device is not op.device or rec.extra != op.extra_hash:
            raise _out(op, "device or extra key differ from the block's")
        if op.extra_hash is not None and not (m.caps.extra_keys and m.caps.vllm_api):
            raise _out(op, "extra_hash given to a target without extra keys")
        if isinstance(op.extra_hash, ops.ExtraKey) \
                and not op.extra_hash.fields_used <= m.caps.extra_key_fields:
            raise _out(op, "extra key fields beyond the target's")
        if not m.pools[op.device].cached_active(rec.content):
            raise _out(op, "the content is not cached and held (a request could miss)")
        return
    if isinstance(op, ops.TrackerStart):
        return
    if isinstance(op, ops.SeqTrack):
        t = _table(m, op)
        if not m.seqs.started:
            raise _out(op, "the trackers were not created")
        e = m.seqs.entries.get(t.key)
        if e is not None and not e.access:
            # the last-access tracker would take it, the computed tracker refuse it: the
            # failure would come half way through.
            raise _out(op, f"sequence {t.key} is still in the computed tracker")
        return
    if isinstance(op, ops.SeqUntrack):
        e = _entry(m, op, _table(m, op, live=False))
        if op.computed and e.computed is None and e.frozen is None:
            raise _out(op, "the computed tracker has no entry for it")
        return
    if isinstance(op, ops.SeqCachedTokens):
        if not m.caps.vllm_api:
            raise _out(op, "get_num_cached_tokens is vLLM-generation only")
        try:
            _entry(m, op, _table(m, op))
        except _NotTracked:  # the vLLM tracker starts an entry on demand
            raise _out(op, "sequence not tracked") from None
        return
    if isinstance(op, ops.SeqComputedIds):
        t = _table(m, op, live=False)
        _on_gpu_ids(m, op, t)
        if not m.caps.aphrodite_api:
            raise _out(op, "get_cached_computed_blocks_and_update is Aphrodite-generation only")
        if not m.seqs.started:
            raise _out(op, "the trackers were not created")
        e = m.seqs.entries.get(t.key)
        if e is None or e.computed is None:
            raise _NotTracked(f"{op.kind}: sequence {t.key} is not in the computed tracker")
        # stale ids: only the computed tracker is asked; a finished (freed) sequence it still
        # holds has no blocks, which a list without a gap cannot be extended from.
        if not t.live:
            if e.gap:
                raise _out(op, "a freed table whose list has a gap (returned as is)")
            raise _NotTracked(f"{op.kind}: sequence {t.key} has no blocks (its table was freed)")
        # end stale ids
        if e.computed is None or not t.blocks:
            raise _out(op, "needs an Aphrodite computed-tracker entry and a block")
        if not e.gap and len(e.computed) > len(t.blocks) - 1:
            raise _out(op, "the sequence lost blocks since the last call")
        return
    if isinstance(op, ops.SeqAccess):
        _entry(m, op, _table(m, op, live=False))
        if op.now < 0:
            raise _out(op, "negative time")
        return
    if isinstance(op, ops.SeqStampBlocks):
        t = _table(m, op)
        _entry(m, op, t)
        if m.pc:
            _on_gpu_ids(m, op, t)
        return
    raise _out(op, "not an engine-side operation")


# --------------------------------------------------------------------------- steps


def common_computed_ids(m: Model, op: ops.CommonComputedIds) -> None:
    lists = [[m.blocks[h].id for h in lst] for lst in op.lists]
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


def hit_burst(m: Model, op: ops.HitBurst) -> None:
    pool = m.pools[op.device]
    pool.query(True, op.count)
    m.blocks.made += op.count  # each request made a block object and dropped it


def tracker_start(m: Model, op: ops.TrackerStart) -> None:
    m.seqs.started = True
    m.seqs.entries.clear()


def seq_track(m: Model, op: ops.SeqTrack) -> None:
    m.seqs.entries[op.table] = SeqEntry(access=True,
                                        computed=[] if m.caps.aphrodite_api else None)


def seq_untrack(m: Model, op: ops.SeqUntrack) -> None:
    e = m.seqs.entries[op.table]
    e.access, e.last = False, None
    if op.computed:
        e.computed, e.gap, e.frozen = None, False, None
    if e.empty:
        del m.seqs.entries[op.table]


def full_block_contents(m: Model, t: TableRec) -> list[int]:
    """Content keys of the table's full blocks, from its tokens and extra key."""
    out, node = [], ROOT
    for i in range(len(t.tokens) // m.bs):
        for tok in t.tokens[i * m.bs:(i + 1) * m.bs]:
            node = m.trie.step(node, tok, t.extra)
        out.append(node)
    return out


def seq_cached_tokens(m: Model, op: ops.SeqCachedTokens) -> None:
    e = m.seqs.entries[op.table]
    note = ""
    if e.frozen is not None and op.prefill:
        want = e.frozen
    else:
        gpu = m.pools[Dev.GPU]
        n = 0
        for content in full_block_contents(m, m.tables[op.table]) if m.pc else ():
            cached = gpu.id_of.get(content)
            if cached is None or not gpu.is_computed(cached):
                note = gpu.why_uncomputed(cached)
                break
            n += 1
        want = n * m.bs
    frozen = e.frozen is not None and op.prefill
    e.frozen = want
    got = m.c.outcome.value
    if got != want:
        why = " (frozen during prefill)" if frozen else note
        m.c.flag(F.COMPUTED, f"get_num_cached_tokens{why}", expected=want, observed=got)


def seq_computed_ids(m: Model, op: ops.SeqComputedIds) -> None:
    e = m.seqs.entries[op.table]
    ids = [m.blocks[k].id for k in m.tables[op.table].blocks]
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
        m.c.flag(F.COMPUTED, f"get_cached_computed_blocks_and_update{note}", expected=e.computed,
                 observed=got)


def seq_access(m: Model, op: ops.SeqAccess) -> None:
    m.seqs.entries[op.table].last = op.now


def seq_stamp_blocks(m: Model, op: ops.SeqStampBlocks) -> None:
    last = m.seqs.entries[op.table].last
    if last is not None:
        mark_ids(m, [m.blocks[k].id for k in m.tables[op.table].blocks], last)


ENGINE_STEPS: dict[type[Op], Callable[[Model, Any], None]] = {
    ops.CommonComputedIds: common_computed_ids,
    ops.HitBurst: hit_burst,
    ops.TrackerStart: tracker_start,
    ops.SeqTrack: seq_track,
    ops.SeqUntrack: seq_untrack,
    ops.SeqCachedTokens: seq_cached_tokens,
    ops.SeqComputedIds: seq_computed_ids,
    ops.SeqAccess: seq_access,
    ops.SeqStampBlocks: seq_stamp_blocks,
}
