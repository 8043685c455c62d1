"""Bytes to v1 ``BlockPool`` operations, one at a time (the v1 family's fuzz decoder, the core's
:class:`~properties.core.family.Decoder` protocol).

Each decision reads the core :class:`~fuzz.core.bytesource.ByteSource` (so any byte string,
the empty one included, decodes, and one flipped byte changes one decision). Operations are
drawn engine-shaped against the current state, as the block-level machine draws them: requests
(with siblings that differ in one key input), a table's prefix hits (``get_cached_block`` then
``touch``) and new blocks, ``cache_full_blocks`` (masked, behind window nulls),
``cache_partial_block``, frees (reverse or forward), sharing, lookups over several groups,
``evict_blocks``, ``reset_prefix_cache``, refused allocations, ``take_events`` and the isolated
misuse probes (:class:`~models.families.v1.ops.Probe`).

The decoder follows the target's responses through the oracle it is handed
(:class:`~properties.families.v1.family.PoolOracle` keeps the last judged step's outcome and
snapshot): the blocks ``get_new_blocks`` returned, the hits ``get_cached_block`` found, the
free count. Contract: it stops after ``max_ops`` operations (probes not counted), when the
input is used up, or after ``4 * max_ops`` decisions.
"""

from __future__ import annotations

import enum
from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any

from fuzz.core.bytesource import ByteSource
from models.families.v1 import ops
from models.families.v1.pool_model import PoolConfig
from properties.families.v1.machine import MAX_REQUESTS, MISUSE_KINDS, MM_LENGTHS
from properties.families.v1.targets import PoolTarget

#: The machine's default configuration: 7 usable blocks, two groups (block sizes 2 and 6).
CONFIG = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2, 6), events=True)
MAX_OPS = 64
_MM = sorted(MM_LENGTHS)

#: What one decision yields: an operation, answered with what the target returned.
Draw = Generator[ops.Op, Any, None]
#: Operations the block machine draws and this decoder does not yet (the API engines use around
#: transfers and copies: ``unpin_blocks``, ``move_block_hashes``, ``emit_cached_block_events``;
#: nor does it set ``free_blocks``' ``evict_first``).
UNDRIVEN = frozenset({ops.Unpin.name, ops.MoveHashes.name, ops.EmitCached.name})


class Level(enum.Enum):
    """The v1 family's fuzz harness levels (``python -m fuzz --family v1 run NAME``)."""

    POOL = "pool"


@dataclass
class _Table:
    req: int
    group: int
    ids: list[int]
    num_cached: int


class PoolDecoder:
    """One input's program, drawn against the state the judged steps show."""

    def __init__(self, data: bytes, target: PoolTarget, config: PoolConfig = CONFIG, *,
                 max_ops: int = MAX_OPS) -> None:
        self.src = ByteSource(data)
        self.target = target
        self.config = config
        self.max_ops = max_ops
        self.op_starts: list[int] = []
        self.reqs: list[ops.Req] = []
        self.num_hashes: list[int] = []  # full hash blocks per request
        self.tables: list[_Table] = []
        self.num_free = config.num_blocks - 1
        self._ops = 0
        self._program = self._draw()
        self._started = False

    # ------------------------------------------------------------------ the protocol
    def attach(self, judge: Any) -> None:
        """The pool's judge offers nothing beyond the capabilities."""

    def kinds(self) -> frozenset[str]:
        caps = self.target.caps
        absent = {ops.Evict.name} if not caps.evict_blocks else set()
        if not caps.partial_blocks:
            absent.add(ops.CachePartial.name)
        return frozenset(ops.OPS) - absent - UNDRIVEN

    def next_op(self, judge: Any) -> ops.Op | None:
        """The next operation; ``judge`` (the family's) holds what the last one returned."""
        start = self.src.consumed
        snapshot = getattr(judge, "snapshot", None)
        if snapshot is not None:
            self.num_free = snapshot.num_free
        try:
            if self._started:
                op = self._program.send(getattr(judge, "outcome", None))
            else:
                self._started = True
                op = next(self._program)
        except StopIteration:
            return None
        self.op_starts.append(start)
        return op

    # ------------------------------------------------------------------ the program
    def _draw(self) -> Draw:
        rounds = 0
        while not self.src.exhausted and self._ops < self.max_ops and rounds < 4 * self.max_ops:
            rounds += 1
            yield from self._one()

    def _step(self, op: ops.Op) -> Generator[ops.Op, Any, Any]:
        if not isinstance(op, ops.Probe):
            self._ops += 1
        if isinstance(op, ops.Req):
            self.reqs.append(op)
            self.num_hashes.append(len(op.tokens) // self.config.hash_block_size)
        result = yield op
        return result

    def _request(self) -> ops.Req:
        s, hbs = self.src, self.config.hash_block_size
        n = s.int_in(0, 7 * hbs)
        tokens = tuple(s.below(3) for _ in range(n))
        mm: tuple[tuple[str, int, int], ...] = ()
        if n and s.flag(30):
            ident = s.pick(_MM)
            mm = ((ident, s.int_in(0, min(n - 1, 3)), MM_LENGTHS[ident]),)
        embeds = None
        if n and self.target.caps.keys_prompt_embeds and s.flag(20):
            embeds = bytes(s.below(2) for _ in range(n))
        return ops.Req(tokens=tokens, lora=s.pick([None, None, 1, 2]),
                       salt=s.pick([None, None, "s1", "s2"]), mm=mm, embeds=embeds)

    def _sibling(self) -> ops.Req:
        s = self.src
        base = s.pick(self.reqs)
        n = len(base.tokens)
        field_ = s.pick(["lora", "salt", "mm", "embeds", "tokens"])
        if field_ == "lora":
            return replace(base, lora=s.pick([None, 1, 2]))
        if field_ == "salt":
            return replace(base, salt=s.pick([None, "s1", "s2"]))
        if field_ == "mm" and n:
            ident = s.pick(_MM)
            return replace(base, mm=((ident, s.int_in(0, min(n - 1, 3)), MM_LENGTHS[ident]),))
        if field_ == "embeds" and n and self.target.caps.keys_prompt_embeds:
            return replace(base, embeds=bytes(s.below(2) for _ in range(n)))
        extra = tuple(s.below(3) for _ in range(s.int_in(1, 4)))
        return replace(base, tokens=base.tokens + extra,
                       embeds=None if base.embeds is None else base.embeds + bytes(len(extra)))

    def _cacheable(self, t: _Table) -> int:
        return min(len(t.ids), self.num_hashes[t.req] // self.config.scale(t.group))

    def _allocate(self) -> Draw:
        s, cfg = self.src, self.config
        r = s.below(len(self.reqs))
        g = s.below(len(cfg.group_block_sizes))
        size, scale = cfg.group_block_sizes[g], cfg.scale(g)
        need = -(-len(self.reqs[r].tokens) // size) + s.below(2)
        nulls = s.pick([0, 0, 1, 2]) if self.target.caps.skips_null_blocks else 0
        hits: list[int] = []
        if not nulls and s.below(3):
            for i in range(self.num_hashes[r] // scale):
                got = yield from self._step(ops.Lookup(r, (i + 1) * scale - 1, (g,)))
                if got is None:
                    break
                hits.append(got[0])
            if hits:
                yield from self._step(ops.Touch(tuple(hits)))
        n = max(0, min(need - len(hits) - nulls, self.num_free))
        new = (yield from self._step(ops.GetNew(n))) if n or s.flag() else []
        ids = [0] * nulls + hits + (new or [])
        if ids:
            table = _Table(r, g, ids, len(hits))
            self.tables.append(table)
            limit = self._cacheable(table)
            if limit > table.num_cached and s.below(3):
                yield from self._step(ops.CacheFull(r, tuple(ids), table.num_cached, limit, g))
                table.num_cached = limit

    def _cache_full(self) -> Draw:
        s = self.src
        ready = [t for t in self.tables if self._cacheable(t) > t.num_cached]
        if not ready:
            return
        t = s.pick(ready)
        full = s.int_in(t.num_cached + 1, self._cacheable(t))
        mask = None
        if self.target.caps.skips_null_blocks and s.flag(25):
            mask = tuple(s.flag() for _ in range(full - t.num_cached))
        yield from self._step(ops.CacheFull(t.req, tuple(t.ids), t.num_cached, full, t.group,
                                            mask))
        t.num_cached = full

    def _partial_units(self, t: _Table) -> int:
        scale, i = self.config.scale(t.group), t.num_cached
        if scale < 2 or i >= len(t.ids) or t.ids[i] == 0:
            return 0
        return min(scale - 1, self.num_hashes[t.req] - i * scale)

    def _cache_partial(self) -> Draw:
        ready = [t for t in self.tables if self._partial_units(t) > 0]
        if not ready or not self.target.caps.partial_blocks:
            return
        t = self.src.pick(ready)
        j = self.src.int_in(1, self._partial_units(t))
        tokens = (t.num_cached * self.config.group_block_sizes[t.group]
                  + j * self.config.hash_block_size)
        yield from self._step(ops.CachePartial(t.req, t.ids[t.num_cached], tokens, t.group))

    def _housekeeping(self) -> Draw:
        s, cfg = self.src, self.config
        action = s.pick(["events", "evict", "reset", "over_allocate", "misuse", "lookup"])
        arg = s.below(16)
        if action == "events":
            yield from self._step(ops.TakeEvents())
        elif action == "evict" and self.target.caps.evict_blocks:
            ids = sorted({1 + arg % (cfg.num_blocks - 1), 1 + (arg // 4) % 3})
            yield from self._step(ops.Evict(tuple(ids[: 1 + arg % 2])))
        elif action == "reset":
            yield from self._step(ops.Reset())
        elif action == "over_allocate":
            yield from self._step(ops.GetNew(self.num_free + 1 + arg % 2))
        elif action == "misuse":
            kind = MISUSE_KINDS[arg % len(MISUSE_KINDS)]
            yield from self._step(ops.Probe(kind, arg // len(MISUSE_KINDS)))
        elif action == "lookup" and any(self.num_hashes):
            r = s.pick([i for i, h in enumerate(self.num_hashes) if h])
            groups = s.subset(range(len(cfg.group_block_sizes)), 3, min_size=1)
            yield from self._step(ops.Lookup(r, s.below(self.num_hashes[r]), groups))

    def _one(self) -> Draw:
        s = self.src
        choice = s.below(8)
        reqs = self.reqs
        if choice == 0 or not reqs:
            if len(reqs) < MAX_REQUESTS:
                yield from self._step(self._request())
            return
        if choice == 1 and len(reqs) < MAX_REQUESTS:
            yield from self._step(self._sibling())
        elif choice == 2:
            yield from self._allocate()
        elif choice == 3:
            yield from self._cache_full()
        elif choice == 4:
            yield from self._cache_partial()
        elif choice == 5 and self.tables:
            t = self.tables.pop(s.below(len(self.tables)))
            yield from self._step(ops.Free(tuple(reversed(t.ids)) if s.flag(67)
                                           else tuple(t.ids)))
        elif choice == 6 and self.tables:
            t = s.pick(self.tables)
            if t.num_cached:
                shared = t.ids[: t.num_cached]
                yield from self._step(ops.Touch(tuple(shared)))
                self.tables.append(_Table(t.req, t.group, list(shared), t.num_cached))
        else:
            yield from self._housekeeping()


def step_features(op: ops.Op, outcome: Any, snapshot: Any) -> set[tuple[object, ...]]:
    """Behavioural coverage of one judged step: the operation, the shape of what it returned,
    the free count and (up to 8) how many distinct keys the blocks hold; a probe: whether it found
    something."""
    if isinstance(op, ops.Probe):
        return {("probe", op.misuse, outcome is not None)}
    shape = None if outcome is None else (len(outcome) if isinstance(outcome, list)
                                          else type(outcome).__name__)
    keys = {k for k in snapshot.primary.values() if k is not None}
    return {(op.name, shape, snapshot.num_free, min(len(keys), 8))}
