"""What the allocator answers about blocks: which of them hold computed KV
(``ComputedBlockIds``, ``CachedPrefix``), how many ids a set of blocks would take
(``CountTouched``, ``CountFullTouched``), the hit rate (``HitRate``), copy-on-write pairs not yet
drained (``ClearCopyOnWrites``), dropping the cache (``ResetPrefixCache``), and each block's
refcount and device (``BlockInfo``: the number of live holders of its id, which counts handles
and the null block, and the device the block lives on).

An answer that lets an engine skip work names a prefix of the blocks asked about whose ids hold
computed KV (the shadow memory checks the claim, ``models.families.v0.computed_claims``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import HIT_RATE_ERROR, Invariant, Measure
from models.families.v0.invariants import Family
from models.families.v0.ops import common
from models.families.v0.ops.base import Arg, ArgSpec, Op, Out
from models.families.v0.ops.common import pairs
from models.families.v0.ops.values import Dev

if TYPE_CHECKING:
    from collections.abc import Mapping

    from models.families.v0.allocator_model import Model
    from models.families.v0.pool import Pool

F = Family


def computed_prefix(pool: Pool, ids: Iterable[int | None]) -> list[int]:
    """The leading run of ``ids`` that are computed: an engine skips ``len(result)`` blocks
    of the sequence, so a computed id after an uncomputed one must not be reported."""
    out: list[int] = []
    for i in ids:
        if i is None or not pool.is_computed(i):
            break
        out.append(i)
    return out


@dataclass(frozen=True, slots=True)
class ComputedBlockIds(Op):
    """Aphrodite ``get_computed_block_ids(prev_computed, ids of blocks, skip_last)``; value:
    list of ids. ``prev_computed`` (the ids already known computed) is ``()`` but in a
    ``Malformed`` call (stale ids: a list longer than the ids considered)."""

    kind: ClassVar[str] = "computed_block_ids"
    misuse_family: ClassVar[Invariant] = Family.COMPUTED
    mutates: ClassVar[bool] = False
    malformed: ClassVar[Mapping[str, ArgSpec]] = {
        "blocks": (Arg.GPU_IDS, True),
        # stale ids: more previously computed ids than ids considered
        "prev_computed": (Arg.PREV_IDS, True)}
    blocks: tuple[int, ...]
    skip_last: bool = True
    prev_computed: tuple[int, ...] = ()

    def misuse(self, m: Model) -> str | None:
        common.api(m.caps.aphrodite_api, "get_computed_block_ids")
        if self.prev_computed:  # stale ids: only a malformed call passes one
            raise Out("previously computed ids (the model starts from none)")
        recs = [common.live(m, h) for h in self.blocks]
        if m.pc and any(r.device is Dev.CPU for r in recs):
            return "get_computed_block_ids with a CPU block"
        if m.pc and self.skip_last and not recs:
            return "get_computed_block_ids of no blocks with skip_last"
        return None

    def step(self, m: Model) -> None:
        ids = [m.blocks[h].id for h in self.blocks]
        considered = ids[:-1] if self.skip_last else ids
        gpu = m.pools[Dev.GPU]
        want = computed_prefix(gpu, considered) if m.pc else []
        got = m.c.outcome.value
        if got != want:
            why = gpu.why_uncomputed(considered[len(want)]) \
                if len(considered) > len(want) else ""
            # Two defects answer here: ids past the computed prefix (a hole before them), and
            # ids of the prefix that are not computed at all.
            hole = (isinstance(got, list) and len(got) <= len(considered)
                    and got != considered[: len(got)])
            m.c.flag(F.COMPUTED, f"get_computed_block_ids{why}"
                     + (": not a prefix of the ids (past a hole)" if hole else ""),
                     expected=want, observed=got)


def _live_blocks(m: Model, blocks: tuple[int, ...]) -> None:
    for h in blocks:
        common.live(m, h)


@dataclass(frozen=True, slots=True)
class CachedPrefix(Op):
    """vLLM ``find_cached_blocks_prefix(hashes of blocks, device)``; value: list of hashes."""

    kind: ClassVar[str] = "cached_prefix"
    mutates: ClassVar[bool] = False
    malformed: ClassVar[Mapping[str, ArgSpec]] = {"blocks": (Arg.LIST, True),
                                                  "device": (Arg.DEVICE, False)}
    blocks: tuple[int, ...]
    device: Dev = Dev.GPU

    def misuse(self, m: Model) -> str | None:
        common.api(m.caps.vllm_api, self.kind)
        _live_blocks(m, self.blocks)
        return None

    def step(self, m: Model) -> None:
        pool = m.pools[self.device]
        n = 0
        cached: int | None = None
        for h in self.blocks if m.pc else ():
            content = m.blocks[h].content
            cached = None if content is None else pool.id_of.get(content)
            if cached is None or not pool.is_computed(cached):
                break
            n += 1
        want = [m.c.after.block_hashes.get(h) for h in self.blocks[:n]]
        got = m.c.outcome.value
        if not isinstance(got, list) or got != want:
            why = pool.why_uncomputed(cached) if n < len(self.blocks) else ""
            m.c.flag(F.COMPUTED, f"find_cached_blocks_prefix: the computed cached prefix is "
                     f"{n} block(s){why}", expected=want, observed=got)


@dataclass(frozen=True, slots=True)
class CountTouched(Op):
    """Aphrodite ``get_num_blocks_touched(blocks, device, lookahead)``; value: int."""

    kind: ClassVar[str] = "count_touched"
    mutates: ClassVar[bool] = False
    malformed: ClassVar[Mapping[str, ArgSpec]] = {"blocks": (Arg.BLOCKS, False),
                                                  "device": (Arg.DEVICE, False),
                                                  "lookahead": (Arg.COUNT, False)}
    blocks: tuple[int, ...]
    device: Dev = Dev.GPU
    lookahead: int = 0

    def misuse(self, m: Model) -> str | None:
        common.api(m.caps.aphrodite_api, self.kind)
        if self.lookahead < 0:
            raise Out("negative lookahead")
        _live_blocks(m, self.blocks)
        return None

    def step(self, m: Model) -> None:
        bs, la, pool = m.bs, self.lookahead, m.pools[self.device]
        total = 0
        ids: set[int | None] = set()
        for h in self.blocks:
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
            m.c.flag(F.FREE, "get_num_blocks_touched", expected=total,
                     observed=m.c.outcome.value)


@dataclass(frozen=True, slots=True)
class CountFullTouched(Op):
    """vLLM ``get_num_full_blocks_touched(blocks, device)``; value: int."""

    kind: ClassVar[str] = "count_full_touched"
    mutates: ClassVar[bool] = False
    malformed: ClassVar[Mapping[str, ArgSpec]] = {"blocks": (Arg.BLOCKS, False),
                                                  "device": (Arg.DEVICE, False)}
    blocks: tuple[int, ...]
    device: Dev = Dev.GPU

    def misuse(self, m: Model) -> str | None:
        common.api(m.caps.vllm_api, self.kind)
        _live_blocks(m, self.blocks)
        return None

    def step(self, m: Model) -> None:
        pool = m.pools[self.device]
        if m.pc:  # every full block that would need an id: not cached, or cached but evictable
            full = [m.blocks[h] for h in self.blocks if m.is_full(m.blocks[h])]
            want = sum(1 for r in full
                       if r.content is None or not pool.cached_active(r.content))
        else:  # naive: distinct full block objects
            want = sum(1 for h in dict.fromkeys(self.blocks) if m.is_full(m.blocks[h]))
        if m.c.outcome.value != want:
            m.c.flag(F.FREE, "get_num_full_blocks_touched", expected=want,
                     observed=m.c.outcome.value)


@dataclass(frozen=True, slots=True)
class ClearCopyOnWrites(Op):
    """``clear_copy_on_writes()``; value: the (src, dst) pairs recorded since the last drain."""

    kind: ClassVar[str] = "clear_cows"
    records_cows: ClassVar[bool] = False  # it drains them: its value, judged by its step

    def step(self, m: Model) -> None:
        got = pairs(m.c.outcome.value)
        if got != []:
            m.c.flag(F.COW, "clear_copy_on_writes returned pairs that were already drained (or "
                     "never happened)", expected=[], observed=m.c.outcome.value)


@dataclass(frozen=True, slots=True)
class HitRate(Op):
    """``get_prefix_cache_hit_rate(device)``; value: float."""

    kind: ClassVar[str] = "hit_rate"
    mutates: ClassVar[bool] = False
    malformed: ClassVar[Mapping[str, ArgSpec]] = {"device": (Arg.DEVICE, False)}
    device: Dev = Dev.GPU

    def step(self, m: Model) -> None:
        want = m.pools[self.device].hit_rate() if m.pc else -1.0
        got = m.c.outcome.value
        if not isinstance(got, int | float) or (
                abs(float(got) - want) > 1e-9 if not m.pc
                else not m.pools[self.device].rate_shown(float(got), m.caps.tolerated)):
            error = (Measure(HIT_RATE_ERROR, round(abs(float(got) - want), 9))
                     if isinstance(got, int | float) else None)
            m.c.flag(F.HIT, f"hit rate on {self.device.value}", expected=want, observed=got,
                     measure=error)


@dataclass(frozen=True, slots=True)
class ResetPrefixCache(Op):
    """vLLM ``reset_prefix_cache(device)``; value: bool (False while any block is in use)."""

    kind: ClassVar[str] = "reset_prefix_cache"
    malformed: ClassVar[Mapping[str, ArgSpec]] = {"device": (Arg.DEVICE_OR_NONE, False)}
    device: Dev | None = None

    def misuse(self, m: Model) -> str | None:
        common.api(m.caps.vllm_api, self.kind)
        return None

    def step(self, m: Model) -> None:
        devices = [Dev.CPU, Dev.GPU] if self.device is None else [self.device]
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
            m.c.flag(F.CACHE, "reset_prefix_cache result", expected=ok,
                     observed=m.c.outcome.value)


@dataclass(frozen=True, slots=True)
class BlockInfo(Op):
    """``get_block_refcount(id)`` and ``get_block_device(id)`` of each block's id; value:
    ``[[refcount, device value], ...]`` in the order of ``blocks``."""

    kind: ClassVar[str] = "block_info"
    misuse_family: ClassVar[Invariant] = Family.RC  # a freed handle holds no id to ask about
    mutates: ClassVar[bool] = False
    blocks: tuple[int, ...]

    def misuse(self, m: Model) -> str | None:
        for h in self.blocks:
            rec = common.block(m, h)
            common.not_reused(m, rec)
            if not rec.live:
                return f"refcount/device query of freed block {h} (it holds no id)"
        return None

    def step(self, m: Model) -> None:
        got = m.c.outcome.value
        if not isinstance(got, list) or len(got) != len(self.blocks):
            m.c.flag(F.RC, "get_block_refcount/get_block_device: one answer per block",
                     expected=len(self.blocks), observed=got)
            return
        for h, answer in zip(self.blocks, got, strict=True):
            rec = m.blocks[h]
            block_id = rec.id
            if block_id is None:  # not reached: the contract requires live handles
                continue
            refcount, device = answer
            want = m.refcount.get(block_id, 0)
            if refcount != want:
                m.c.flag(F.RC, f"get_block_refcount({block_id}) of block {h}", expected=want,
                         observed=refcount)
            if device != rec.device.value:
                m.c.flag(F.SWAP, f"get_block_device({block_id}) of block {h}",
                         expected=rec.device.value, observed=device)
