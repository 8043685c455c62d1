"""One v1 fuzz input, end to end: bytes -> v1 pool operations -> the v1 executor.

Each decision reads the core :class:`~fuzz.core.bytesource.ByteSource` (so any byte string,
the empty one included, decodes, and one flipped byte changes one decision). Operations are
drawn engine-shaped against the current state, as the block-level machine draws them: requests
(with siblings that differ in one key input), a table's prefix hits (``get_cached_block`` then
``touch``) and new blocks, ``cache_full_blocks`` (masked, behind window nulls),
``cache_partial_block``, frees (reverse or forward), sharing, lookups over several groups,
``evict_blocks``, ``reset_prefix_cache``, refused allocations, ``take_events`` and the isolated
misuse probes. Every step is judged by :class:`~properties.families.v1.executor.Executor`
(model, key contract, event replay); its first :class:`~models.core.invariants.Violation` ends
the input and is the verdict.

Contract: :func:`execute` never raises for anything the target does; exceptions that escape
are bugs of the suite.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from fuzz.core.bytesource import ByteSource
from fuzz.core.engine import Feature
from models.core.invariants import Violation
from models.families.v1 import ops
from models.families.v1.pool_model import PoolConfig
from properties.families.v1.executor import Executor
from properties.families.v1.machine import MAX_REQUESTS, MISUSE_KINDS, MM_LENGTHS
from properties.families.v1.targets import PoolTarget

#: The machine's default configuration: 7 usable blocks, two groups (block sizes 2 and 6).
CONFIG = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2, 6), events=True)
MAX_OPS = 64
_MM = sorted(MM_LENGTHS)


@dataclass
class V1Execution:
    """What happened to one input: the program run and the verdict."""

    program: list[ops.Op] = field(default_factory=list)
    violation: Violation | None = None
    stopped: str | None = None
    features: set[Feature] = field(default_factory=set)

    @property
    def failed(self) -> bool:
        return self.violation is not None


@dataclass
class _Table:
    req: int
    group: int
    ids: list[int]
    num_cached: int


class _Decoder:
    def __init__(self, data: bytes, target: PoolTarget, config: PoolConfig) -> None:
        self.src = ByteSource(data)
        self.target = target
        self.config = config
        self.ex = Executor(target, config)
        self.tables: list[_Table] = []
        self.features: set[Feature] = set()

    def step(self, op: ops.Op) -> Any:
        result = self.ex.step(op)
        m = self.ex.model
        shape = None if result is None else (len(result) if isinstance(result, list)
                                             else type(result).__name__)
        self.features.add((op.name, shape, m.num_free, min(len(m.keys), 8)))
        return result

    # ------------------------------------------------------------------ draws
    def request(self) -> ops.Req:
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

    def sibling(self) -> ops.Req:
        s = self.src
        base = s.pick(self.ex.reqs)
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

    def cacheable(self, t: _Table) -> int:
        scale = self.config.scale(t.group)
        return min(len(t.ids), len(self.ex.hashes[t.req]) // scale)

    def allocate(self) -> None:
        s, cfg = self.src, self.config
        r = s.below(len(self.ex.reqs))
        g = s.below(len(cfg.group_block_sizes))
        size, scale = cfg.group_block_sizes[g], cfg.scale(g)
        need = -(-len(self.ex.reqs[r].tokens) // size) + s.below(2)
        nulls = s.pick([0, 0, 1, 2]) if self.target.caps.skips_null_blocks else 0
        hits: list[int] = []
        if not nulls and s.below(3):
            for i in range(len(self.ex.hashes[r]) // scale):
                got = self.step(ops.Lookup(r, (i + 1) * scale - 1, (g,)))
                if got is None:
                    break
                hits.append(got[0])
            if hits:
                self.step(ops.Touch(tuple(hits)))
        n = max(0, min(need - len(hits) - nulls, self.ex.model.num_free))
        new = self.step(ops.GetNew(n)) if n or s.flag() else []
        ids = [0] * nulls + hits + (new or [])
        if ids:
            table = _Table(r, g, ids, len(hits))
            self.tables.append(table)
            limit = self.cacheable(table)
            if limit > table.num_cached and s.below(3):
                self.step(ops.CacheFull(r, tuple(ids), table.num_cached, limit, g))
                table.num_cached = limit

    def cache_full(self) -> None:
        s = self.src
        ready = [t for t in self.tables if self.cacheable(t) > t.num_cached]
        if not ready:
            return
        t = s.pick(ready)
        full = s.int_in(t.num_cached + 1, self.cacheable(t))
        mask = None
        if self.target.caps.skips_null_blocks and s.flag(25):
            mask = tuple(s.flag() for _ in range(full - t.num_cached))
        self.step(ops.CacheFull(t.req, tuple(t.ids), t.num_cached, full, t.group, mask))
        t.num_cached = full

    def partial_units(self, t: _Table) -> int:
        scale, i = self.config.scale(t.group), t.num_cached
        if scale < 2 or i >= len(t.ids) or t.ids[i] == 0:
            return 0
        return min(scale - 1, len(self.ex.hashes[t.req]) - i * scale)

    def cache_partial(self) -> None:
        ready = [t for t in self.tables if self.partial_units(t) > 0]
        if not ready or not self.target.caps.partial_blocks:
            return
        t = self.src.pick(ready)
        j = self.src.int_in(1, self.partial_units(t))
        tokens = (t.num_cached * self.config.group_block_sizes[t.group]
                  + j * self.config.hash_block_size)
        self.step(ops.CachePartial(t.req, t.ids[t.num_cached], tokens, t.group))

    def housekeeping(self) -> None:
        s, cfg, m = self.src, self.config, self.ex.model
        action = s.pick(["events", "evict", "reset", "over_allocate", "misuse", "lookup"])
        arg = s.below(16)
        if action == "events":
            self.step(ops.TakeEvents())
        elif action == "evict" and self.target.caps.evict_blocks:
            ids = sorted({1 + arg % (cfg.num_blocks - 1), 1 + (arg // 4) % 3})
            self.step(ops.Evict(tuple(ids[: 1 + arg % 2])))
        elif action == "reset":
            self.step(ops.Reset())
        elif action == "over_allocate":
            self.step(ops.GetNew(m.num_free + 1 + arg % 2))
        elif action == "misuse":
            kind = MISUSE_KINDS[arg % len(MISUSE_KINDS)]
            finding = self.ex.probe(kind, arg // len(MISUSE_KINDS))
            self.features.add(("probe", kind, finding is not None))
        elif action == "lookup" and any(self.ex.hashes):
            r = s.pick([i for i, h in enumerate(self.ex.hashes) if h])
            groups = s.subset(range(len(cfg.group_block_sizes)), 3, min_size=1)
            self.step(ops.Lookup(r, s.below(len(self.ex.hashes[r])), groups))

    def one(self) -> None:
        s = self.src
        choice = s.below(8)
        reqs = self.ex.reqs
        if choice == 0 or not reqs:
            if len(reqs) < MAX_REQUESTS:
                self.step(self.request())
            return
        if choice == 1 and len(reqs) < MAX_REQUESTS:
            self.step(self.sibling())
        elif choice == 2:
            self.allocate()
        elif choice == 3:
            self.cache_full()
        elif choice == 4:
            self.cache_partial()
        elif choice == 5 and self.tables:
            t = self.tables.pop(s.below(len(self.tables)))
            self.step(ops.Free(tuple(reversed(t.ids)) if s.flag(67) else tuple(t.ids)))
        elif choice == 6 and self.tables:
            t = s.pick(self.tables)
            if t.num_cached:
                shared = t.ids[: t.num_cached]
                self.step(ops.Touch(tuple(shared)))
                self.tables.append(_Table(t.req, t.group, list(shared), t.num_cached))
        else:
            self.housekeeping()


def execute(data: bytes, target: PoolTarget, config: PoolConfig = CONFIG, *,
            max_ops: int = MAX_OPS) -> V1Execution:
    """Decode ``data`` against ``target`` and judge every step."""
    d = _Decoder(data, target, config)
    out = V1Execution(program=d.ex.program, features=d.features)
    try:
        d.ex.check()
        rounds = 0
        while not d.src.exhausted and len(d.ex.program) < max_ops and rounds < 4 * max_ops:
            rounds += 1
            d.one()
        if len(d.ex.program) >= max_ops:
            out.stopped = f"{max_ops} operations"
    except Violation as v:
        out.violation = v
    return out
