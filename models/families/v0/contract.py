"""What a program may ask, judged before the target is blamed for anything.

Three verdicts for an operation in the model's current state:

- *out of contract* (:class:`OutOfContract`): the program itself left the contract (a handle
  that never existed, appending to a block that is not the last of its chain, an API the target
  does not have, ...). Whatever the target does is acceptable; generators learn to avoid it.
- *misuse*: the contract says the target must refuse it with a typed error and change nothing
  (double free, over-append, a partial immutable block, ...). Fed only to targets claiming
  ``typed_errors``; for others it is out of contract too.
- *shortfall*: it is valid but needs more free ids than the device has, so it must fail with
  ``NoFreeBlocksError`` (and, for atomic targets, change nothing).
"""

from __future__ import annotations

from collections.abc import Iterable

from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.blocks import BlockRec, TableRec
from models.families.v0.content import ROOT
from models.families.v0.hash_query import hash_contract
from models.families.v0.malformed import NotValidated, malformed_misuse
from models.families.v0.operations import Dev, Op
from models.families.v0.table_model import allocate_cost, append_cost, new_blocks_needed
from models.families.v0.window import NULL_KEY, holds_null, in_window


class OutOfContract(Exception):
    """The program left the contract; the target cannot be blamed for what follows."""


class Inconclusive(OutOfContract):
    """The model's search over unobservable choices was pruned and no branch survived: no
    false alarm is raised, the example is discarded."""


class _Out(Exception):
    pass


def _block(m: Model, h: int) -> BlockRec:
    if h < 0 or h not in m.blocks:
        raise _Out(f"block handle {h} never existed")
    return m.blocks[h]


def _not_reused(m: Model, rec: BlockRec) -> None:
    """A freed handle whose object the target may have recycled names an unknown block."""
    if m.blocks.reusable(rec):
        raise _Out(f"block handle {rec.key} was freed and its object may have been reused")


def _prefix_intact(m: Model, recs: Iterable[BlockRec]) -> None:
    """Each block's predecessors are live. A predecessor freed while its successor lives (the
    engine never does this: ``BlockTable.free`` frees a whole chain) goes back to the target's
    pool (API.md 4.2), and a swap re-allocates the successor under its ``prev_block``
    (API.md 4.5) while it makes block objects: the recycled predecessor may come back as the
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
                raise _Out(f"block {rec.key} follows block {cur}, freed while block {rec.key} "
                           "lived")
            cur = prev.prev


def _live(m: Model, h: int) -> BlockRec:
    rec = _block(m, h)
    if not rec.live:
        raise _Out(f"block handle {h} was freed")
    return rec


def _prev(m: Model, prev: int | None, dev: Dev) -> BlockRec | None:
    if prev is None:
        return None
    rec = _live(m, prev)
    if rec.device is not dev:
        raise _Out(f"prev block {prev} is on {rec.device.value}, not {dev.value}")
    return rec


def _extra(m: Model, extra: ops.Extra) -> None:
    if extra is not None and not (m.caps.extra_keys and m.caps.vllm_api):
        raise _Out("extra_hash given to a target without extra keys")
    if isinstance(extra, ops.ExtraKey) and not extra.fields_used <= m.caps.extra_key_fields:
        raise _Out(f"extra key fields {sorted(extra.fields_used)} beyond the target's "
                   f"{sorted(m.caps.extra_key_fields)}")


def _api(ok: bool, name: str) -> None:
    if not ok:
        raise _Out(f"{name} is not in this target's API generation")


def _full_blocks(m: Model, prev: BlockRec | None, chunks: Iterable[tuple[int, ...]]) -> str | None:
    for chunk in chunks:
        if len(chunk) > m.bs or (m.pc and len(chunk) != m.bs):
            return f"immutable block of {len(chunk)} tokens (block size {m.bs})"
        if len(chunk) != m.bs:
            raise _Out("naive allocator: partial immutable block")
    if prev is not None and len(prev.tokens) != m.bs:
        if m.pc:
            return f"immutable block after unhashed block {prev.key}"
        raise _Out("naive allocator: immutable block after a partial block")
    return None


def misuse_or_out(m: Model, op: Op) -> str | None:
    """The misuse in ``op`` (None if it is valid); raises :class:`OutOfContract`."""
    try:
        return _check(m, op)
    except _Out as why:
        raise OutOfContract(f"{op.kind}: {why}") from None


def _check(m: Model, op: Op) -> str | None:
    c = m.caps
    if isinstance(op, ops.Malformed):  # contract in models.families.v0.malformed
        if isinstance(op.call, ops.Malformed):
            raise _Out("a malformed call of a malformed call")
        _check(m, op.call)
        try:
            return malformed_misuse(m, op)
        except NotValidated as why:
            raise _Out(str(why)) from None
    if isinstance(op, ops.AllocateMutable):
        _extra(m, op.extra_hash)
        prev = _prev(m, op.prev, op.device)
        if prev is not None and len(prev.tokens) != m.bs:
            raise _Out(f"prev block {op.prev} is not full")
        return None
    if isinstance(op, ops.AllocateImmutable | ops.AllocateImmutableChain):
        _extra(m, op.extra_hash)
        prev = _prev(m, op.prev, op.device)
        chunks = (op.tokens,) if isinstance(op, ops.AllocateImmutable) else op.chunks
        return _full_blocks(m, prev, chunks)
    if isinstance(op, ops.Append):
        rec = _block(m, op.block)
        _not_reused(m, rec)
        if not rec.live:
            # Upstream writes into id-less block objects; only a write that fills one (and so
            # needs an id to be promoted) must be refused.
            if m.pc and len(rec.tokens) + len(op.tokens) == m.bs:
                return f"append fills freed block {op.block}"
            raise _Out(f"partial append to freed block {op.block}")
        if rec.device is Dev.CPU:
            raise _Out("append to a swapped-out (CPU) block")
        if not m.blocks.is_last(op.block):
            raise _Out(f"block {op.block} is not the last of its chain")
        if any(not m.blocks[k].live for k in m.blocks.chain(op.block)):
            raise _Out(f"block {op.block} follows a freed block")
        if m.pc and rec.content is not None:
            return f"append to immutable (hashed) block {op.block}"
        if len(rec.tokens) + len(op.tokens) > m.bs:
            return f"append overflows block {op.block}"
        return None
    if isinstance(op, ops.Fork):
        _block(m, op.block)
        chain = [m.blocks[k] for k in m.blocks.chain(op.block)]
        for r in chain:
            _not_reused(m, r)
        if any(not r.live for r in chain):
            return f"fork of a chain holding a freed block ({op.block})"
        if len({r.device for r in chain}) > 1:
            raise _Out("fork of a chain spanning both devices")
        return None
    if isinstance(op, ops.Free):
        rec = _block(m, op.block)
        _not_reused(m, rec)
        return None if rec.live else f"double free of block {op.block}"
    if isinstance(op, ops.Swap):
        _api(c.swap, "swap")
        recs = [_block(m, h) for h in op.blocks]
        if op.src is op.dst:  # refused before the blocks are looked at
            return f"swap from {op.src.value} to itself"
        if len(set(op.blocks)) != len(op.blocks):
            return "the same block swapped twice"
        for rec in recs:
            _not_reused(m, rec)
            if not rec.live or rec.device is not op.src:
                return f"block {rec.key} is not live on {op.src.value}"
        _prefix_intact(m, recs)
        # stale ids: handles sharing an id in one call (models.families.v0.shared_swap)
        from models.families.v0.shared_swap import keeps_shared_ids
        if len({r.id for r in recs}) != len(recs) and not keeps_shared_ids(m):
            raise _Out("handles sharing an id swapped in one call by a target that does not "
                       "claim to keep them shared (API.md 4.5 splits them, dropping a pair)")
        return None
    if isinstance(op, ops.MarkAccessed):
        recs = [_live(m, h) for h in op.blocks]
        if m.pc and any(r.device is Dev.CPU for r in recs):
            return "mark_blocks_as_accessed with a CPU block"
        return None
    if isinstance(op, ops.MarkComputed):
        for h in op.blocks:
            _block(m, h)
        return None
    if isinstance(op, ops.ComputedBlockIds):
        _api(c.aphrodite_api, "get_computed_block_ids")
        if op.prev_computed:  # stale ids: only a malformed call passes one
            raise _Out("previously computed ids (the model starts from none)")
        recs = [_live(m, h) for h in op.blocks]
        if m.pc and any(r.device is Dev.CPU for r in recs):
            return "get_computed_block_ids with a CPU block"
        if m.pc and op.skip_last and not recs:
            return "get_computed_block_ids of no blocks with skip_last"
        return None
    if isinstance(op, ops.CachedPrefix | ops.CountFullTouched):
        _api(c.vllm_api, op.kind)
        for h in op.blocks:
            _live(m, h)
        return None
    if isinstance(op, ops.CountTouched):
        _api(c.aphrodite_api, op.kind)
        if op.lookahead < 0:
            raise _Out("negative lookahead")
        for h in op.blocks:
            _live(m, h)
        return None
    if isinstance(op, ops.ResetPrefixCache):
        _api(c.vllm_api, op.kind)
        return None
    if isinstance(op, ops.ClearCopyOnWrites | ops.HitRate | ops.GetNullBlock):
        return None
    if isinstance(op, ops.BlockInfo):  # block queries: semantics in models.families.v0.block_info
        for h in op.blocks:
            rec = _block(m, h)
            _not_reused(m, rec)
            if not rec.live:
                return f"refcount/device query of freed block {h} (it holds no id)"
        return None
    if isinstance(op, ops.HashRecompute):  # content hash: semantics in hash_query
        out = hash_contract(m, op)
        if out is not None:
            raise _Out(out)
        return None
    # stale ids: marking freed handles' ids, one-tracker edits (models.families.v0.stale_ids,
    # models.families.v0.tracker_edits)
    if isinstance(op, ops.MarkStaleIds | ops.SeqTrackerEdit):
        from models.families.v0.stale_ids import StaleOut, mark_stale_misuse
        from models.families.v0.tracker_edits import EditOut, edit_misuse
        try:
            if isinstance(op, ops.MarkStaleIds):
                return mark_stale_misuse(m, op)
            return edit_misuse(m, op)
        except (StaleOut, EditOut) as why:
            raise _Out(str(why)) from None
    # end stale ids
    # freed behind: a table block freed through the allocator, what the damaged table may
    # still do (table_misuse), tracker calls to refuse (tracker_misuse)
    from models.families.v0.table_misuse import FreedOut, applies, freed_behind_misuse
    from models.families.v0.tracker_misuse import TrackerOut, tracker_misuse
    try:
        if applies(m, op):
            return freed_behind_misuse(m, op)
        if isinstance(op, ops.SeqLostBlocks | ops.SeqCachedTokensUnsized):
            return tracker_misuse(m, op)
    except (FreedOut, TrackerOut) as why:
        raise _Out(str(why)) from None
    # end freed behind
    if isinstance(op, ops.DEVICE_OPS):  # device calls: contract in models.families.v0.device_calls
        from models.families.v0.device_calls import DeviceOut, device_misuse
        try:
            return device_misuse(m, op)
        except DeviceOut as why:
            raise _Out(str(why)) from None
    # end device calls
    if isinstance(op, ops.InjectedHash):  # injected hash, contract in injected_hash
        from models.families.v0.injected_hash import InjectedOut, injected_contract
        try:
            injected_contract(op, m.bs)
        except InjectedOut as why:
            raise _Out(str(why)) from None
        return None
    if isinstance(op, ops.Construct):  # construction: contract in models.families.v0.construction
        from models.families.v0.construction import ConstructOut, construct_misuse
        try:
            return construct_misuse(op)
        except ConstructOut as why:
            raise _Out(str(why)) from None
    table = getattr(op, "table", None)
    if isinstance(op, ops.ENGINE_OPS) and table in m.tables and holds_null(m.tables[table]):
        # a sequence holds every token, its windowed table only the window's blocks.
        raise _Out("engine-side question about a table whose window dropped blocks")
    if isinstance(op, ops.ENGINE_OPS):  # engine-side ops: contract in models.families.v0.trackers
        from models.families.v0.trackers import engine_check
        return engine_check(m, op)
    if isinstance(op, ops.NullBlockQuery | ops.NullBlockMisuse):
        if m.null_id is None:
            raise _Out("the null block is not taken yet")
        if isinstance(op, ops.NullBlockQuery):
            return None
        if op.action not in ops.NULL_BLOCK_MISUSES:
            raise _Out(f"unknown null block write {op.action!r}")
        if op.action in ("device_free", "device_fork"):
            return (f"{op.action.removeprefix('device_')} of the null block on the GPU "
                    "allocator (its id is never released or shared)")
        return f"{op.action} on the null block (read-only)"
    if isinstance(op, ops.IdSpace | ops.SwapLog):  # table queries: read-only, no misuse
        if isinstance(op, ops.IdSpace) and any(i not in m.pools[op.device].ids for i in op.ids):
            raise _Out(f"an id outside {op.device.value}")
        return None
    return _check_table(m, op)


def _check_window(m: Model, t: TableRec, op: Op) -> str | None:
    """Sliding-window tables (see ``models.families.v0.window``)."""
    if not isinstance(op, ops.TableAppend):
        return None
    if op.computed is None:
        return None if t.window is None else "sliding-window append without num_computed_slots"
    if t.window is None:
        raise _Out("num_computed_slots for a table without a sliding window")
    if op.computed > len(t.tokens):
        # Computed slots beyond the tokens: refused when the window would drop every block
        # or a block the tokens are written into; other cases are left open.
        end = op.computed // m.bs - t.window
        if end >= len(t.blocks):
            return "num_computed_slots moves the window past the table's last block"
        if op.tokens and len(t.tokens) // m.bs < end:
            return "the window drops a block the tokens are written into"
        if end > 0 and t.blocks[end - 1] != NULL_KEY and \
                len(m.blocks[t.blocks[end]].tokens) < m.bs:
            return "the window drops the predecessor of a block not yet full"
    if not 0 <= op.computed <= len(t.tokens):
        raise _Out("num_computed_slots outside 0..the table's token count")
    return None


def _check_table(m: Model, op: Op) -> str | None:
    if isinstance(op, ops.TableAllocate):
        _extra(m, op.extra_hash)
        if op.window is not None and op.window < 1:
            raise _Out("a sliding window of fewer than one block")
        return None if op.tokens else "allocate of an empty table"
    table = getattr(op, "table", None)
    if not isinstance(table, int) or table not in m.tables:
        raise _Out(f"table handle {table} never existed")
    t = m.tables[table]
    if t.live and isinstance(op, ops.TableFork | ops.TableSwap):
        _check_window(m, t, op)
    if not t.live:
        if isinstance(op, ops.TableFree | ops.TableSwap | ops.TableMarkAccessed
                      | ops.TableSlots | ops.TableReallocate):
            # A freed table holds no blocks: upstream frees, swaps or marks nothing, and
            # allocates it afresh.
            raise _Out(f"{op.kind} on freed (empty) table {table}")
        return f"{op.kind} on freed table {table}"
    if isinstance(op, ops.TableAppend | ops.TableEnsureSlots):
        if t.device is Dev.CPU:
            raise _Out("appending to a swapped-out (CPU) table")
        if min(getattr(op, "lookahead", 0), getattr(op, "slots", 0)) < 0:
            raise _Out("negative slot count")
        return _check_window(m, t, op)
    if isinstance(op, ops.TableSwap):
        _api(m.caps.swap, "swap")
        if op.src is op.dst:
            return f"swap of table {table} from {op.src.value} to itself"
        return None if t.device is op.src else f"table {table} is not on {op.src.value}"
    if isinstance(op, ops.TableMarkAccessed):
        return "mark_blocks_as_accessed with CPU blocks" if m.pc and t.device is Dev.CPU else None
    if isinstance(op, ops.TableFork | ops.TableFree):
        return None
    if isinstance(op, ops.TableReallocate):
        if not op.tokens:
            raise _Out("reallocate with no tokens")
        return f"allocate of table {table}, which already holds blocks"
    if isinstance(op, ops.TableSlots):
        if op.lookahead < 0:
            raise _Out("negative lookahead")
        return None
    raise _Out(f"unknown operation {op.kind}")


def shortfall(m: Model, op: Op) -> bool:
    """Whether the (valid) operation needs more free ids than its device has."""
    need, dev = _need(m, op)
    return need > m.pools[dev].free


def _need(m: Model, op: Op) -> tuple[int, Dev]:
    if isinstance(op, ops.AllocateMutable):
        return 1, op.device
    if isinstance(op, ops.AllocateImmutable):
        return m.chain_cost(op.device, [m.content_of(op.prev, op.tokens, op.extra_hash)]), op.device
    if isinstance(op, ops.AllocateImmutableChain):
        contents = []
        node = ROOT if op.prev is None else m.blocks[op.prev].end
        for chunk in op.chunks:
            for tok in chunk:
                node = m.trie.step(node, tok, op.extra_hash)
            contents.append(node)
        return m.chain_cost(op.device, contents), op.device
    if isinstance(op, ops.Append):
        rec = m.blocks[op.block]
        copies = m.shared(rec) and (bool(op.tokens) or not m.pc)
        return int(copies), rec.device
    if isinstance(op, ops.Swap):  # handles sharing an id: models.families.v0.shared_swap
        from models.families.v0.shared_swap import swap_cost
        return swap_cost(m, op), op.dst
    if isinstance(op, ops.GetNullBlock):
        return int(m.null_id is None), Dev.GPU
    if isinstance(op, ops.TableAllocate):
        return allocate_cost(m, op), op.device
    if isinstance(op, ops.TableAppend):
        return append_cost(m, m.tables[op.table], op), Dev.GPU
    if isinstance(op, ops.TableEnsureSlots):
        return new_blocks_needed(m, m.tables[op.table], op.slots), Dev.GPU
    if isinstance(op, ops.TableSwap):  # the null block is not swapped
        t = m.tables[op.table]
        return m.swap_cost([m.blocks[k] for k in in_window(t)], op.dst), op.dst
    return 0, Dev.GPU
