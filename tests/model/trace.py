"""A fluent helper for hand-written traces: each step names the operation and only what the
target showed that a reader could not guess (new ids, free counts, cached sets); tokens, handle
numbering, hashes (an honest chain hash) and refcounts (live holders) follow automatically and
can be overridden to play a broken target."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from models.core.invariants import Invariant, Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Capabilities, Config
from models.families.v0.operations import Dev, ErrorKind, Op, Outcome, Snapshot
from models.families.v0.oracle import Oracle

GPU, CPU = Dev.GPU, Dev.CPU


class Trace:
    def __init__(self, bs: int = 4, gpu: int = 4, cpu: int = 0, *, introspect: bool = True,
                 **caps: Any) -> None:
        self.config = Config(bs, gpu, cpu, Capabilities(**caps))
        self.oracle = Oracle(self.config)
        self.introspect = introspect
        self.free = {GPU: gpu, CPU: cpu}
        self.ids: dict[int, int | None] = {}
        self.tokens: dict[int, list[int]] = {}
        self.prev: dict[int, int | None] = {}
        self.extra: dict[int, int | None] = {}
        self.hash_override: dict[int, int | None] = {}
        self.tables: dict[int, tuple[int | None, ...]] = {}
        self.ttokens: dict[int, tuple[int, ...]] = {}
        self.cached: dict[Dev, frozenset[int]] = {GPU: frozenset(), CPU: frozenset()}
        self.evictable: dict[Dev, frozenset[int]] = {GPU: frozenset(), CPU: frozenset()}
        self.rc_override: dict[int, int] = {}
        self.null: int | None = None
        self.ended: set[int] = set()
        self.ended_tables: set[int] = set()
        self.next_block = 0
        self.next_table = 0
        self.oracle.initial_check(self.snapshot())

    # ------------------------------------------------------------------ what the target shows

    def chain_hash(self, h: int, memo: dict[int, int | None] | None = None) -> int | None:
        """An honest chain hash (iterative: chains may be long; ``memo`` shares prefixes)."""
        if not self.config.caps.prefix_caching:
            return None
        memo = {} if memo is None else memo
        chain = [h]
        while chain[-1] not in memo and (p := self.prev[chain[-1]]) is not None:
            chain.append(p)
        value = memo.get(chain[-1]) if chain[-1] in memo else None
        for k in reversed(chain):
            if k in memo:
                continue
            if k in self.hash_override:
                value = self.hash_override[k]
            elif len(self.tokens[k]) != self.config.block_size or (
                    self.prev[k] is not None and value is None):
                value = None
            else:
                value = hash((value, repr(self.tokens[k]), self.extra[k]))  # no int collisions
            memo[k] = value
        return value

    def refcounts(self) -> dict[int, int]:
        total = self.config.num_gpu_blocks + self.config.num_cpu_blocks
        counts = dict.fromkeys(range(total), 0)
        held = [i for i in self.ids.values() if i is not None]
        held += [i for ids in self.tables.values() for i in ids if i is not None]
        if self.null is not None:
            held.append(self.null)
        for i in held:
            counts[i] = counts.get(i, 0) + 1
        counts.update(self.rc_override)
        return counts

    def snapshot(self) -> Snapshot:
        live = [h for h in self.ids if h not in self.ended]
        memo: dict[int, int | None] = {}
        snap = Snapshot(
            free=dict(self.free),
            blocks={h: self.ids[h] for h in self.ids},
            block_tokens={h: tuple(self.tokens[h]) for h in live},
            block_hashes={h: self.chain_hash(h, memo) for h in live},
            tables={t: ids for t, ids in self.tables.items()},
            table_tokens={t: self.ttokens[t] for t in self.tables if t not in self.ended_tables},
        )
        if not self.introspect:
            return snap
        return Snapshot(snap.free, snap.blocks, snap.block_tokens, snap.block_hashes,
                        snap.tables, snap.table_tokens, dict(self.cached),
                        dict(self.evictable), self.refcounts())

    # ------------------------------------------------------------------ steps

    def do(self, op: Op, *, ids: Iterable[int] = (), moved: Mapping[int, int] | None = None,
           table: tuple[int, ...] | None = None, free: int | tuple[int, int] | None = None,
           value: Any = None, error: ErrorKind | None = None, cows: Iterable[tuple[int, int]] = (),
           admitted: bool | None = None, hashes: Mapping[int, int | None] | None = None,
           cached: Iterable[int] | None = None, evictable: Iterable[int] | None = None,
           cpu_cached: Iterable[int] | None = None, cpu_evictable: Iterable[int] | None = None,
           refcounts: Mapping[int, int] | None = None) -> Trace:
        """Run one step: the target did ``op`` and now shows these ids/counts/sets."""
        for h in self.ended:
            self.ids.pop(h, None)
        for t in self.ended_tables:
            self.tables.pop(t, None)
        self.ended, self.ended_tables = set(), set()
        new_blocks: tuple[int, ...] = ()
        new_table: int | None = None
        if error is None:
            new_blocks, new_table = self._apply(op, list(ids), table)
        for h, i in (moved or {}).items():
            self.ids[h] = i
        if table is not None and error is None:
            target_table = new_table if new_table is not None else getattr(op, "table", None)
            if target_table is not None:
                self.tables[target_table] = table
        if isinstance(free, int):
            self.free[GPU] = free
        elif free is not None:
            self.free[GPU], self.free[CPU] = free
        self.hash_override.update(hashes or {})
        self.rc_override.update(refcounts or {})
        if cached is not None:
            self.cached[GPU] = frozenset(cached)
        if evictable is not None:
            self.evictable[GPU] = frozenset(evictable)
        if cpu_cached is not None:
            self.cached[CPU] = frozenset(cpu_cached)
        if cpu_evictable is not None:
            self.evictable[CPU] = frozenset(cpu_evictable)
        outcome = Outcome(error=error, value=value, new_blocks=new_blocks, new_table=new_table,
                          cows=tuple(cows), admitted=admitted)
        self.oracle.step(op, outcome, self.snapshot())
        for world in self.oracle.worlds:
            world.self_check()
        return self

    def _new(self, prev: int | None, tokens: Iterable[int], extra: int | None,
             block_id: int | None) -> int:
        h = self.next_block
        self.next_block += 1
        self.ids[h], self.tokens[h], self.prev[h], self.extra[h] = \
            block_id, list(tokens), prev, extra
        return h

    def _apply(self, op: Op, ids: list[int],
               table: tuple[int, ...] | None) -> tuple[tuple[int, ...], int | None]:
        made: list[int] = []
        prev: int | None
        if isinstance(op, ops.AllocateMutable):
            made.append(self._new(op.prev, (), None, ids[0]))
        elif isinstance(op, ops.AllocateImmutable):
            made.append(self._new(op.prev, op.tokens, op.extra_hash, ids[0]))
        elif isinstance(op, ops.AllocateImmutableChain):
            prev = op.prev
            for chunk, i in zip(op.chunks, ids, strict=True):
                prev = self._new(prev, chunk, op.extra_hash, i)
                made.append(prev)
        elif isinstance(op, ops.Append):
            self.tokens[op.block].extend(op.tokens)
        elif isinstance(op, ops.Fork):
            chain = [op.block]
            while (p := self.prev[chain[0]]) is not None:
                chain.insert(0, p)
            prev = None
            for k, source in enumerate(chain):
                shown = ids[k] if ids else self.ids[source]
                prev = self._new(prev, self.tokens[source], self.extra[source], shown)
                made.append(prev)
        elif isinstance(op, ops.Free):
            self.ids[op.block] = None
            self.ended.add(op.block)
        elif isinstance(op, ops.GetNullBlock) and self.null is None:
            self.null = ids[0] if ids else None
        elif isinstance(op, ops.TableAllocate | ops.TableFork):
            t = self.next_table
            self.next_table += 1
            src = getattr(op, "table", None)
            self.tables[t] = table if table is not None else self.tables[src] if src is not None \
                else ()
            self.ttokens[t] = op.tokens if isinstance(op, ops.TableAllocate) else \
                self.ttokens[src] if src is not None else ()
            return (), t
        elif isinstance(op, ops.TableAppend):
            self.ttokens[op.table] = self.ttokens[op.table] + op.tokens
        elif isinstance(op, ops.TableFree):
            self.tables[op.table] = ()
            self.ended_tables.add(op.table)
        return tuple(made), None

    def rejects(self, family: Invariant, op: Op, **seen: Any) -> Violation:
        """The same as :meth:`do`, but the oracle must reject the step with ``family``."""
        with pytest.raises(Violation) as info:
            self.do(op, **seen)
        assert info.value.family is family, str(info.value)
        return info.value
