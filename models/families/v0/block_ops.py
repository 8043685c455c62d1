"""Step functions for the block-level operations, on a :class:`Model` inside a step.

Each applies the operation as the contract requires (the caller has already checked that it
is in contract, not misuse, and fits), follows the ids the target shows, and compares returned
values. Handles the runner created are taken from ``outcome.new_blocks``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from models.core.invariants import Family
from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.operations import Dev
from models.families.v0.pool import Pool

F = Family


def new_handles(m: Model, count: int) -> list[int] | None:
    made = list(m.c.outcome.new_blocks)
    if len(made) != count:
        m.c.flag(F.TABLE, f"expected {count} new block handle(s)", expected=count,
                 observed=made)
        return None
    return made


def pairs(value: Any) -> list[list[int]] | None:
    try:
        return [[int(a), int(b)] for a, b in value]
    except (TypeError, ValueError):
        return None


def allocate_mutable(m: Model, op: ops.AllocateMutable) -> None:
    keys = new_handles(m, 1)
    if keys:
        hint = m.c.block_hint(keys[0])
        m.alloc_mutable(keys[0], op.device, op.prev, op.extra_hash, hint)
        m.c.write(keys[0], hint, None)


def allocate_immutable(m: Model, op: ops.AllocateImmutable) -> None:
    keys = new_handles(m, 1)
    if keys:
        hint = m.c.block_hint(keys[0])
        m.alloc_immutable(keys[0], op.device, op.prev, op.tokens, op.extra_hash, hint)
        m.c.write(keys[0], hint, 0)


def allocate_chain(m: Model, op: ops.AllocateImmutableChain) -> None:
    keys = new_handles(m, len(op.chunks))
    if keys is None:
        return
    prev = op.prev
    for key, chunk in zip(keys, op.chunks, strict=True):
        hint = m.c.block_hint(key)
        m.alloc_immutable(key, op.device, prev, chunk, op.extra_hash, hint)
        m.c.write(key, hint, 0)
        prev = key


def append(m: Model, op: ops.Append) -> None:
    rec = m.blocks[op.block]
    first = len(rec.tokens)
    hint = m.c.block_hint(op.block)
    m.append(rec, op.tokens, hint)
    m.c.write(op.block, hint, first if op.tokens else None)


def fork(m: Model, op: ops.Fork) -> None:
    chain = m.blocks.chain(op.block)
    keys = new_handles(m, len(chain))
    if keys:
        m.fork(chain, keys)
        for key in keys:
            m.c.write(key, m.c.block_hint(key), None)


def free(m: Model, op: ops.Free) -> None:
    m.free(m.blocks[op.block])
    m.c.write(op.block, None, None)
    m.c.ended_blocks.append(op.block)


def swap(m: Model, op: ops.Swap) -> None:
    m.c.swapping = True
    recs = [m.blocks[h] for h in op.blocks]
    hints = [m.c.block_hint(h) for h in op.blocks]
    mapping = m.swap(recs, op.src, op.dst, hints)
    check_mapping(m, mapping)
    for h, hint in zip(op.blocks, hints, strict=True):
        m.c.write(h, hint, None)


def check_mapping(m: Model, mapping: list[list[int]]) -> None:
    got = pairs(m.c.outcome.value)
    if got != mapping:
        m.c.flag(F.SWAP, "swap mapping differs from {source id: destination id}",
                 expected=mapping, observed=m.c.outcome.value)


def mark_accessed(m: Model, op: ops.MarkAccessed) -> None:
    mark_ids(m, [m.blocks[h].id for h in op.blocks], op.now)


def mark_ids(m: Model, ids: list[int | None], now: float) -> None:
    if not m.pc:
        return
    gpu = m.pools[Dev.GPU]
    for block_id in ids:
        if block_id is not None:
            gpu.accessed[block_id] = now


def mark_computed(m: Model, op: ops.MarkComputed) -> None:
    if not m.pc:
        return
    gpu = m.pools[Dev.GPU]
    gpu.computed.update(i for i in gpu.touched if gpu.is_active(i))
    gpu.touched.clear()
    gpu.revived.clear()


def computed_prefix(pool: Pool, ids: Iterable[int | None]) -> list[int]:
    """The leading run of ``ids`` that are computed: an engine skips ``len(result)`` blocks
    of the sequence, so a computed id after an uncomputed one must not be reported."""
    out: list[int] = []
    for i in ids:
        if i is None or not pool.is_computed(i):
            break
        out.append(i)
    return out


def computed_block_ids(m: Model, op: ops.ComputedBlockIds) -> None:
    ids = [m.blocks[h].id for h in op.blocks]
    considered = ids[:-1] if op.skip_last else ids
    gpu = m.pools[Dev.GPU]
    want = computed_prefix(gpu, considered) if m.pc else []
    if m.c.outcome.value != want:
        why = gpu.why_uncomputed(considered[len(want)]) if len(considered) > len(want) else ""
        m.c.flag(F.COMPUTED, f"get_computed_block_ids{why}", expected=want,
                 observed=m.c.outcome.value)


def cached_prefix(m: Model, op: ops.CachedPrefix) -> None:
    pool = m.pools[op.device]
    n = 0
    cached: int | None = None
    for h in op.blocks if m.pc else ():
        content = m.blocks[h].content
        cached = None if content is None else pool.id_of.get(content)
        if cached is None or not pool.is_computed(cached):
            break
        n += 1
    want = [m.c.after.block_hashes.get(h) for h in op.blocks[:n]]
    got = m.c.outcome.value
    if not isinstance(got, list) or got != want:
        why = pool.why_uncomputed(cached) if n < len(op.blocks) else ""
        m.c.flag(F.COMPUTED, f"find_cached_blocks_prefix: the computed cached prefix is {n} "
                 f"block(s){why}", expected=want, observed=got)


def count_touched(m: Model, op: ops.CountTouched) -> None:
    bs, la, pool = m.bs, op.lookahead, m.pools[op.device]
    total = 0
    ids: set[int | None] = set()
    for h in op.blocks:
        rec = m.blocks[h]
        empty = bs - len(rec.tokens)
        if empty and (m.pc or la):
            total += 1 + (-(-(la - empty) // bs) if la > empty else 0)
        elif not m.pc:
            ids.add(rec.id)
        elif rec.content is not None and not pool.cached_active(rec.content):
            total += 1
    total += len(ids)
    if m.c.outcome.value != total:
        m.c.flag(F.FREE, "get_num_blocks_touched", expected=total, observed=m.c.outcome.value)


def count_full_touched(m: Model, op: ops.CountFullTouched) -> None:
    pool = m.pools[op.device]
    if m.pc:  # every full block that would need an id: not cached, or cached but evictable
        full = [m.blocks[h] for h in op.blocks if m.is_full(m.blocks[h])]
        want = sum(1 for r in full if r.content is None or not pool.cached_active(r.content))
    else:  # naive: distinct full block objects
        want = sum(1 for h in dict.fromkeys(op.blocks) if m.is_full(m.blocks[h]))
    if m.c.outcome.value != want:
        m.c.flag(F.FREE, "get_num_full_blocks_touched", expected=want,
                 observed=m.c.outcome.value)


def clear_cows(m: Model, op: ops.ClearCopyOnWrites) -> None:
    got = pairs(m.c.outcome.value)
    if got != []:
        m.c.flag(F.COW, "clear_copy_on_writes returned pairs that were already drained (or "
                 "never happened)", expected=[], observed=m.c.outcome.value)


def hit_rate(m: Model, op: ops.HitRate) -> None:
    want = m.pools[op.device].hit_rate() if m.pc else -1.0
    got = m.c.outcome.value
    if not isinstance(got, int | float) or (
            abs(float(got) - want) > 1e-9 if not m.pc
            else not m.pools[op.device].rate_shown(float(got), m.caps.tolerated)):
        m.c.flag(F.HIT, f"hit rate on {op.device.value}", expected=want, observed=got)


def reset_prefix_cache(m: Model, op: ops.ResetPrefixCache) -> None:
    devices = [Dev.CPU, Dev.GPU] if op.device is None else [op.device]
    ok = True
    for dev in devices:
        pool = m.pools[dev]
        if not m.pc:
            continue
        if pool.free != len(pool.ids):
            ok = False
            break
        pool.reset()
    if m.c.outcome.value is not ok:
        m.c.flag(F.CACHE, "reset_prefix_cache result", expected=ok, observed=m.c.outcome.value)


def null_block(m: Model, op: ops.GetNullBlock) -> None:
    got = m.c.outcome.value
    hint = got if isinstance(got, int) else None
    if m.null_id is None:
        m.null_id = m.fresh(Dev.GPU, hint)
        m.blocks.made += 1  # the null block is a block object too
    elif got != m.null_id:
        m.c.flag(F.LEAK, "the null block changed", expected=m.null_id, observed=got)


BLOCK_STEPS: dict[type[ops.Op], Callable[[Model, Any], None]] = {
    ops.AllocateMutable: allocate_mutable,
    ops.AllocateImmutable: allocate_immutable,
    ops.AllocateImmutableChain: allocate_chain,
    ops.Append: append,
    ops.Fork: fork,
    ops.Free: free,
    ops.Swap: swap,
    ops.MarkAccessed: mark_accessed,
    ops.MarkComputed: mark_computed,
    ops.ComputedBlockIds: computed_block_ids,
    ops.CachedPrefix: cached_prefix,
    ops.CountTouched: count_touched,
    ops.CountFullTouched: count_full_touched,
    ops.ClearCopyOnWrites: clear_cows,
    ops.HitRate: hit_rate,
    ops.ResetPrefixCache: reset_prefix_cache,
    ops.GetNullBlock: null_block,
}
