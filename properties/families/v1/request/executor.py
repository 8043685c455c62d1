"""Runs a request-level program against a ``KVCacheManager`` with the shadow KV memory.

:meth:`RequestExecutor.step` applies one operation as vLLM's scheduler would, checks what it
returned (hits, allocations, ``None`` without side effects) and then the whole state: reference
counts equal the request tables' entries, the free queue holds exactly the unreferenced blocks,
no block serves two groups or two positions, only running requests hold blocks, and every
running request reads back its own KV (:mod:`models.families.v1.request_model`). Programs replay
without Hypothesis (:func:`run_program`), as the xfails file and reproducers need.

The queries a scheduler makes are judged where it makes them: ``get_num_cached_tokens`` (0.34)
is the hit ``get_computed_blocks`` would give and changes nothing; ``get_num_common_prefix_blocks``
(0.33) claims no block some running request does not share; ``evict_blocks`` drops exactly
the named blocks' keys and nothing else; at each step's end ``usage`` is the fraction of usable
blocks not free, ``make_prefix_cache_stats`` returns exactly the lookups
recorded (``record_prefix_cache_stats`` at each admission) and resets since its last call (None
without ``log_stats``), and ``get_block_ids_for_computed_tokens`` lists one block per computed
block of each running request, each holding its computed KV. ``estimate_cached_tokens`` of a
request at its first output (the prefill stats) is the prefix its own keyed blocks serve, the
least over the groups, and only computed tokens. ``take_events`` (events on) returns exactly
the pool's queued events, oldest first, and empties the queue; each ``BlockStored`` names its
group's spec kind and window; replayed into a router's key set
(:class:`models.families.v1.events.Replay`, the pool level's replay) they give exactly the keys
the pool holds, each stored chunk the tokens its hash names; with Dynamo's wheel cached, its
router fed the same events matches what the pool serves (:mod:`properties.families.v1.router`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from models.core.invariants import Violation
from models.families.v1 import request_ops as ops
from models.families.v1.events import Replay, check_stored_tokens, external
from models.families.v1.pool_model import PoolConfig
from models.families.v1.request_invariants import ManagerInvariants as Family
from models.families.v1.request_model import (
    NULL,
    Geometry,
    Identities,
    KVShadow,
    ReqState,
    check_hit,
    check_reads,
)
from properties.core.stepping import ProgramExecutor
from properties.families.v1.adapter import key_parts
from properties.families.v1.request.stand_ins import ManagerRequest, RequestStatus
from properties.families.v1.request.target import ManagerConfig, ManagerTarget
from properties.families.v1.router import open_router
from properties.families.v1.stand_ins import LoraRef

Tables = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Snapshot:
    ref: tuple[int, ...]
    free: tuple[int, ...]
    hashes: tuple[bytes | None, ...]
    tables: dict[int, Tables]


#: The spec kind a ``BlockStored`` of each group kind names (upstream's ``KVCacheSpecKind``).
SPEC_KINDS = {"full": "full_attention", "window": "sliding_window"}

#: The prefix cache stats fields the judge compares (connector hits by source aside).
STATS_FIELDS = ("reset", "requests", "queries", "hits", "preempted_requests",
                "preempted_queries", "preempted_hits")


class RequestExecutor(ProgramExecutor[ops.ROp]):
    def __init__(self, target: ManagerTarget, config: ManagerConfig,
                 step_timeout: float | None = None) -> None:
        """A fresh manager of ``target`` shaped by ``config``; ``step_timeout``: the per-step
        time limit in seconds (None: none)."""
        super().__init__(step_timeout)
        self.target = target
        self.config = config
        self.mgr = target.create(config)
        self.pool = self.mgr.block_pool
        self._hasher = target.hasher(config.hash_block_size)
        groups = range(len(config.groups))
        self.geo = Geometry(config.block_sizes, tuple(config.window(g) for g in groups))
        self.reqs: list[ReqState] = []
        self.handles: list[ManagerRequest] = []
        self.shadow = KVShadow()
        self.ids = Identities()
        self.step_open = False
        self.trace: list[str] | None = None  # the calls as script lines, when recording
        #: the prefix cache stats the manager must report at its next make_prefix_cache_stats
        self.stats: dict[str, int | bool] = self._fresh_stats()
        #: a router's view of the pool, from the events taken so far (events on)
        self.replay = Replay()
        self.unannounceable: set[object] = set()  # hashes of null (never keyed) blocks
        #: the pool's shape as the pool level's router judge reads it (group block sizes)
        self.pool_shape = PoolConfig(config.num_blocks, config.hash_block_size,
                                     config.block_sizes, events=config.events)
        self.router = open_router(self.pool_shape)  # Dynamo's RadixTree, when its wheel is cached
        self.first_output: set[int] = set()  # requests whose prefill stats were taken
        #: whether the pool has held one key on two blocks (events on): from then on, vLLM's
        #: per-copy removals may leave a key-set router behind (``duplicate_events``)
        self.duplicated = False

    @staticmethod
    def _fresh_stats() -> dict[str, int | bool]:
        return {name: False if name == "reset" else 0 for name in STATS_FIELDS}

    def supports(self, method: str) -> bool:
        """Whether the release's manager has the public method ``method`` (the queries that
        differ between releases: ``get_num_cached_tokens``, ``get_num_common_prefix_blocks``)."""
        return callable(getattr(type(self.mgr), method, None))

    def _t(self, line: str) -> None:
        if self.trace is not None:
            self.trace.append(line)

    def _program_json(self, program: list[ops.ROp]) -> list[dict[str, Any]]:
        return ops.program_json(program)

    def _apply(self, op: ops.ROp) -> Any:
        if isinstance(op, ops.Add):
            return self._add(op)
        if isinstance(op, ops.Schedule):
            return self._schedule(op)
        if isinstance(op, ops.EndStep):
            return self._end_step()
        if isinstance(op, ops.Preempt):
            return self._preempt(op.req)
        if isinstance(op, ops.Abort):
            r = self.reqs[op.req]
            if r.status == "running":
                self._call(self.mgr.free, self.handles[op.req])
                self._t(f"mgr.free(r{op.req})  # aborted")
            r.status = "finished"
            return None
        if isinstance(op, ops.ResetCache):
            want = not any(self._tables(i) != ((),) * len(self.config.groups)
                           for i, r in enumerate(self.reqs) if r.live)
            got = bool(self._call(self.mgr.reset_prefix_cache))
            self._t("print('reset_prefix_cache', mgr.reset_prefix_cache())")
            if got != want:
                raise Violation(Family.CACHE, "reset_prefix_cache() succeeds iff no request "
                                "holds blocks", expected=want, observed=got)
            if got:
                self.stats["reset"] = True
            return got
        if isinstance(op, ops.Evict):
            return self._evict(op.req, op.start)
        if isinstance(op, ops.CachedTokens):
            return self._cached_tokens(op.req)
        if isinstance(op, ops.CommonPrefix):
            return self._common_prefix(op.req)
        if isinstance(op, ops.TakeEvents):
            return self._take_events()
        raise TypeError(f"unknown operation {op!r}")

    def _evict(self, i: int, start: int) -> list[int] | None:
        """``evict_blocks`` of running request ``i``'s blocks from index ``start`` on: exactly
        those blocks lose their keys (no later hit can return them); references, the free
        blocks, the tables and every other key stay."""
        if not self.reqs[i].live:
            return None
        ids = sorted({b for table in self._tables(i) for b in table[start:] if b != NULL})
        if not ids:
            return None
        before = self._snapshot()
        self._call(self.mgr.evict_blocks, set(ids))
        self._t(f"mgr.evict_blocks({set(ids)!r})  # r{i}'s load failed from block {start} on")
        after = self._snapshot()
        kept = [b for b in ids if after.hashes[b - 1] is not None]
        others = [b for b in range(1, self.config.num_blocks) if b not in ids
                  and after.hashes[b - 1] != before.hashes[b - 1]]
        if kept or others:
            raise Violation(Family.CACHE, "evict_blocks drops exactly the named blocks' keys",
                            expected=f"no key on {ids}, others unchanged",
                            observed={"still keyed": kept, "others changed": others})
        if (after.ref, sorted(after.free), after.tables) != (before.ref, sorted(before.free),
                                                             before.tables):
            raise Violation(Family.CACHE, "evict_blocks changes no reference, table or free "
                            "block", expected=(before.ref, sorted(before.free)),
                            observed=(after.ref, sorted(after.free)))
        return ids

    def _cached_tokens(self, i: int) -> int | None:
        """0.34's ``get_num_cached_tokens`` for a waiting request: the hit
        ``get_computed_blocks`` gives it now, and nothing changes (no reference, no stats)."""
        r = self.reqs[i]
        if r.status not in ("waiting", "preempted") or not self.supports(
                "get_num_cached_tokens"):
            return None
        before = self._snapshot()
        got = self._call(self.mgr.get_num_cached_tokens, self.handles[i])
        self._t(f"print('r{i} get_num_cached_tokens', mgr.get_num_cached_tokens(r{i}))")
        after = self._snapshot()
        if after != before:
            raise Violation(Family.HIT, f"get_num_cached_tokens(r{i}) changed the manager "
                            "(it only probes the cache)", expected=before, observed=after)
        _blocks, hit, _ = self._call(self.mgr.get_computed_blocks, self.handles[i])
        if got != hit:
            self._t(f"print('r{i} hit', mgr.get_computed_blocks(r{i})[1])")
            raise Violation(Family.HIT, f"get_num_cached_tokens(r{i}) must be the hit "
                            "get_computed_blocks gives it", expected=hit, observed=got)
        return int(got)

    def _common_prefix(self, i: int) -> list[int] | None:
        """0.33's ``get_num_common_prefix_blocks`` for a running request: per group, at most
        the leading blocks every running request holds (cascade attention computes them once
        for all)."""
        if not self.reqs[i].live or not self.supports("get_num_common_prefix_blocks"):
            return None
        got = list(self._call(self.mgr.get_num_common_prefix_blocks,
                              self.handles[i].request_id))
        self._t(f"print('r{i} get_num_common_prefix_blocks', "
                f"mgr.get_num_common_prefix_blocks('r{i}'))")
        tables = [self._tables(j) for j, r in enumerate(self.reqs) if r.live]
        shared = []
        for g in range(len(self.config.groups)):
            n = 0
            while all(n < len(t[g]) and t[g][n] != NULL and t[g][n] == tables[0][g][n]
                      for t in tables):
                n += 1
            shared.append(n)
        if len(got) != len(shared) or any(not 0 <= n <= m for n, m in zip(got, shared,
                                                                           strict=False)):
            raise Violation(Family.CONTENT, f"get_num_common_prefix_blocks(r{i}) claims blocks "
                            "not every running request holds (per group, at most)",
                            expected=shared, observed=got)
        return got

    def _add(self, op: ops.Add) -> int:
        i = len(self.reqs)
        self.reqs.append(ReqState(op.prompt, list(op.outputs), op.salt, op.lora))
        lora = None if op.lora is None else LoraRef(op.lora, f"lora{op.lora}", f"/l/{op.lora}")
        h = ManagerRequest(f"r{i}", list(op.prompt), lora_request=lora, cache_salt=op.salt,
                           num_prompt_tokens=len(op.prompt), hasher=self._hasher)
        self._call(h.rehash)
        self.handles.append(h)
        lora_src = ("None" if lora is None
                    else f"LoraRef({op.lora}, 'lora{op.lora}', '/l/{op.lora}')")
        self._t(f"r{i} = ManagerRequest('r{i}', {list(op.prompt)!r}, lora_request={lora_src}, "
                f"cache_salt={op.salt!r},\n    num_prompt_tokens={len(op.prompt)}, "
                f"hasher=hasher)\nr{i}.rehash()")
        return i

    def _schedule(self, op: ops.Schedule) -> Any:
        r, h = self.reqs[op.req], self.handles[op.req]
        if r.status == "finished" or r.scheduled is not None:
            return None
        if not self.step_open:
            self._call(self.mgr.new_step_starts)
            self.step_open = True
            self._t("\n# a step opens\nmgr.new_step_starts()")
        waiting = r.status in ("waiting", "preempted")
        hit, hit_tables, hit_blocks = 0, ((),) * len(self.config.groups), None
        if waiting:
            hit_blocks, hit, _ = self._call(self.mgr.get_computed_blocks, h)
            hit_tables = tuple(tuple(t) for t in hit_blocks.get_block_ids())
            self._t(f"hit_blocks, hit, _ = mgr.get_computed_blocks(r{op.req})\n"
                    f"print('r{op.req} hit', hit, hit_blocks.get_block_ids())  # {hit}, "
                    f"{[list(t) for t in hit_tables]}")
            check_hit(self.shadow, self.ids, r, hit, hit_tables, self.geo)
        start = hit if waiting else r.computed
        n = min(op.n, len(r.tokens) - start)
        if n <= 0:
            return None
        before = self._snapshot(extra=op.req)
        if waiting:
            out = self._call(self.mgr.allocate_slots, h, n, hit, hit_blocks,
                             num_lookahead_tokens=op.lookahead)
        else:
            out = self._call(self.mgr.allocate_slots, h, n, num_lookahead_tokens=op.lookahead)
        call = (f"mgr.allocate_slots(r{op.req}, {n}, hit, hit_blocks, "
                if waiting else f"mgr.allocate_slots(r{op.req}, {n}, ")
        self._t(f"out = {call}num_lookahead_tokens={op.lookahead})\n"
                f"print('r{op.req} allocate_slots', out and out.get_block_ids())")
        if out is None:
            self._check_no_side_effects(before, self._snapshot(extra=op.req), op.req, start)
            return None
        for group in out.get_block_ids():
            for block in group:
                if block != NULL:
                    self.shadow.handed_out(block)
        if waiting and self.config.log_stats:  # the scheduler records a lookup at admission
            self._call(self.mgr.record_prefix_cache_stats, h, hit)
            self._t(f"mgr.record_prefix_cache_stats(r{op.req}, {hit})  # admitted")
            prefix = "preempted_" if h.num_preemptions > 0 else ""
            for name, count in (("requests", 1), ("queries", len(r.tokens)), ("hits", hit)):
                self.stats[prefix + name] = int(self.stats[prefix + name]) + count
        r.status, h.status = "running", RequestStatus.RUNNING
        end = start + n
        r.scheduled = (start, end)
        h.num_computed_tokens = end  # the scheduler's counter moves when scheduling ends
        self._t(f"# tokens [{start}, {end}) of r{op.req} are computed when the step ends\n"
                f"r{op.req}.status, r{op.req}.num_computed_tokens = RequestStatus.RUNNING, {end}")
        tables = self._tables(op.req)
        self._check_allocation(op.req, tables, hit_tables, start, end + op.lookahead)
        if self.config.events:
            self._null_hashes(op.req, tables)
        writes: dict[tuple[int, int], int] = {}
        for g, table in enumerate(tables):
            bs = self.geo.block_sizes[g]
            for p in range(start, end):
                writes[(table[p // bs], p % bs)] = self.ids.of(r, p)
        self.shadow.schedule(op.req, writes)
        return tables

    def _end_step(self) -> None:
        self._t("# the step ends: its scheduled tokens' KV is computed")
        self.shadow.commit()
        for i, r in enumerate(self.reqs):
            if r.scheduled is None:
                continue
            start, end = r.scheduled
            check_reads(self.shadow, self.ids, r, self._tables(i), self.geo,
                        [self.geo.needed(g, end, start) for g in range(len(self.geo.windows))],
                        pending_ok=False, what=f"r{i}'s forward over [{start}, {end})")
            r.scheduled, r.computed = None, end
            if end < len(r.tokens):
                continue
            if i not in self.first_output:  # its first output: the prefill stats
                self.first_output.add(i)
                if self.supports("estimate_cached_tokens"):
                    self._estimate_cached_tokens(i)
            if r.outputs:
                token = r.outputs.pop(0)
                r.tokens.append(token)
                self._call(self.handles[i].append, token)
                self._t(f"r{i}.append({token})  # sampled")
            else:
                self._call(self.mgr.free, self.handles[i])
                self._t(f"mgr.free(r{i})  # finished")
                r.status = "finished"
        self.step_open = False
        self._step_stats()
        for i, r in enumerate(self.reqs):
            if r.live and r.computed:
                self._computed_block_ids(i)

    def _estimate_cached_tokens(self, i: int) -> int:
        """``estimate_cached_tokens`` of request ``i`` at its first output (the scheduler's
        prefill stats: cache creation is the estimate less the hit): per group, the tokens
        through the last block of its table keyed with its own key for that block; the least
        over the groups (a hit needs every group); never more than the computed tokens."""
        r, h = self.reqs[i], self.handles[i]
        got = self._call(self.mgr.estimate_cached_tokens, h)
        line = f"print('r{i} estimate_cached_tokens', mgr.estimate_cached_tokens(r{i}))"
        hashes = [bytes(x) for x in h.block_hashes]
        hbs = self.config.hash_block_size
        covered = []
        for g, table in enumerate(self._tables(i)):
            bs = self.geo.block_sizes[g]
            n = 0
            for k in reversed(range(len(table))):
                key = None if table[k] == NULL else self.pool.blocks[table[k]].block_hash
                if key is None:
                    continue
                key = bytes(key)
                key_hash, group = key_parts(key)
                own = [j for j in range(k * bs // hbs, min((k + 1) * bs // hbs, len(hashes)))
                       if hashes[j] == key_hash]
                if not own or group != g:
                    self._t(line)
                    raise Violation(Family.CONTENT, f"r{i}'s group {g} block {table[k]} "
                                    f"(index {k}) is keyed for other tokens",
                                    observed=key.hex())
                n = (own[-1] + 1) * hbs
                break
            covered.append(n)
        want = min(covered, default=0)
        self._t(f"{line}  # {want}")
        if got > r.computed:
            raise Violation(Family.COMPUTED, f"estimate_cached_tokens(r{i}) counts only "
                            "computed tokens", expected=f"<= {r.computed}", observed=got)
        if got != want:
            raise Violation(Family.HIT, f"estimate_cached_tokens(r{i}) is the prefix its own "
                            "keyed blocks serve (per group through its last keyed block, the "
                            "least over the groups)", expected=want, observed=got)
        return int(got)

    def _null_hashes(self, i: int, tables: Tables) -> None:
        """The hashes of request ``i``'s null (window-skipped) blocks: no event can announce
        them, so a stored block may name one as its parent."""
        hashes = self.handles[i].block_hashes
        for g, table in enumerate(tables):
            scale = self.geo.block_sizes[g] // self.config.hash_block_size
            for k, block in enumerate(table):
                j = (k + 1) * scale - 1
                if block == NULL and j < len(hashes):
                    self.unannounceable.update((bytes(hashes[j]), external(hashes[j])))

    def _pool_keys(self) -> dict[tuple[bytes, int], list[int]]:
        """The keys the pool's blocks hold: ``(hash, group) -> block ids``."""
        keys: dict[tuple[bytes, int], list[int]] = {}
        for block in self.pool.blocks[1:]:
            if block.block_hash is not None:
                keys.setdefault(key_parts(block.block_hash), []).append(block.block_id)
        return keys

    def _take_events(self) -> list[Any]:
        """``take_events``: exactly the pool's queued events, oldest first, the queue emptied;
        each ``BlockStored`` annotated with its group's spec kind and window; the events
        replayed into a router's key set give the pool's keys (CACHE)."""
        queued = list(self.pool.kv_event_queue)
        got = list(self._call(self.mgr.take_events))
        self._t("for e in mgr.take_events():\n    print(e)")
        if len(got) != len(queued) or any(a is not b for a, b in zip(got, queued, strict=False)):
            raise Violation(Family.CACHE, "take_events() returns exactly the pool's queued "
                            "events, oldest first", expected=queued, observed=got)
        if self.pool.kv_event_queue:
            raise Violation(Family.CACHE, "take_events() empties the pool's queue",
                            observed=list(self.pool.kv_event_queue))
        if not self.config.events:
            if got:
                raise Violation(Family.CACHE, "take_events() is empty with events off",
                                observed=got)
            return got
        for e in got:
            if type(e).__name__ != "BlockStored":
                continue
            g = getattr(e, "group_idx", None) or 0
            want = (SPEC_KINDS[self.config.groups[g][0]], self.config.window(g))
            seen = (getattr(e, "kv_cache_spec_kind", None),
                    getattr(e, "kv_cache_spec_sliding_window", None))
            if seen != want:
                raise Violation(Family.CACHE, "BlockStored names its group's spec kind and "
                                "sliding window", expected=want, observed=(seen, e))
        keys = self._pool_keys()
        hashes = [[bytes(x) for x in h.block_hashes] for h in self.handles]
        self.replay.apply(got, self.unannounceable)
        self.replay.check(keys)
        check_stored_tokens(got, [r.tokens for r in self.reqs], hashes,
                            self.config.hash_block_size)
        if self.router is not None:  # after the model's own checks, as at the pool level
            self.router.apply(got)
            self.router.check(self.pool_shape, hashes, keys)
        return got

    def _step_stats(self) -> None:
        """What the scheduler logs once per step: ``usage`` and the prefix cache stats since
        the last step (None without ``log_stats``)."""
        usage = self._call(getattr, self.mgr, "usage")
        free = len(self._free_queue())
        usable = self.config.num_blocks - 1  # the null block is never handed out
        want = 1.0 - free / usable if usable else 0.0
        self._t(f"print('usage', mgr.usage)  # {want:.4f}")
        if not math.isclose(usage, want, abs_tol=1e-9):
            raise Violation(Family.FREE, "usage is the fraction of usable blocks (the null "
                            "block aside) not free", expected=want, observed=usage)
        stats = self._call(self.mgr.make_prefix_cache_stats)
        self._t("print('stats', mgr.make_prefix_cache_stats())")
        if not self.config.log_stats:
            if stats is not None:
                raise Violation(Family.HIT, "make_prefix_cache_stats() is None without "
                                "log_stats", observed=stats)
            return
        got = {name: getattr(stats, name, None) for name in STATS_FIELDS}
        want_stats, self.stats = self.stats, self._fresh_stats()
        if got != want_stats:
            raise Violation(Family.HIT, "make_prefix_cache_stats() reports each lookup "
                            "recorded since its last call once (and a reset), then starts "
                            "over", expected=want_stats, observed=got)

    def _computed_block_ids(self, i: int) -> None:
        """``get_block_ids_for_computed_tokens``: per group, one block per block of computed
        tokens, each real block holding the request's computed KV (what a KV connector saves),
        every block the request still reads real."""
        r = self.reqs[i]
        got = self._call(self.mgr.get_block_ids_for_computed_tokens,
                         self.handles[i].request_id, r.computed)
        tables = tuple(tuple(t) for t in got)
        for g, table in enumerate(tables):
            bs = self.geo.block_sizes[g]
            if len(table) != -(-r.computed // bs):
                self._t(f"print('r{i} computed block ids', "
                        f"mgr.get_block_ids_for_computed_tokens('r{i}', {r.computed}))")
                raise Violation(Family.TABLE, f"get_block_ids_for_computed_tokens(r{i}, "
                                f"{r.computed}): group {g} lists one block per computed block",
                                expected=-(-r.computed // bs), observed=list(table))
        positions = []
        for g, table in enumerate(tables):  # what the request still reads, and every real block
            bs = self.geo.block_sizes[g]
            held = {p for k, block in enumerate(table) if block != NULL
                    for p in range(k * bs, min((k + 1) * bs, r.computed))}
            positions.append(sorted(held | set(self.geo.needed(g, r.computed, r.computed))))
        try:
            check_reads(self.shadow, self.ids, r, tables, self.geo, positions, pending_ok=False,
                        what=f"get_block_ids_for_computed_tokens(r{i}, {r.computed})")
        except Violation:
            self._t(f"print('r{i} computed block ids', "
                    f"mgr.get_block_ids_for_computed_tokens('r{i}', {r.computed}))")
            raise

    def _preempt(self, i: int) -> None:
        r, h = self.reqs[i], self.handles[i]
        if r.status != "running":
            return
        self._call(self.mgr.free, h)
        self._t(f"mgr.free(r{i})  # preempted{' inside the step' if r.scheduled else ''}\n"
                f"r{i}.num_computed_tokens, r{i}.status = 0, RequestStatus.PREEMPTED\n"
                f"r{i}.num_preemptions += 1")
        self.shadow.drop(i)
        h.num_computed_tokens, h.status = 0, RequestStatus.PREEMPTED
        h.num_preemptions += 1
        r.computed, r.scheduled, r.status = 0, None, "preempted"

    # ---------------------------------------------------------------- observation
    def _tables(self, i: int) -> Tables:
        got = self._call(self.mgr.get_block_ids, self.handles[i].request_id)
        return tuple(tuple(t) for t in got)

    def _free_queue(self) -> list[int]:
        queue = self.pool.free_block_queue
        out: list[int] = []
        node = queue.fake_free_list_head.next_free_block
        while node is not None and node is not queue.fake_free_list_tail:
            out.append(node.block_id)
            if len(out) > self.config.num_blocks:
                raise Violation(Family.LEAK, "free queue has a cycle", observed=out[:12])
            node = node.next_free_block
        return out

    def _snapshot(self, extra: int | None = None) -> Snapshot:
        blocks = self.pool.blocks
        live = {i for i, r in enumerate(self.reqs) if r.live}
        if extra is not None:
            live.add(extra)
        return Snapshot(ref=tuple(b.ref_cnt for b in blocks[1:]),
                        free=tuple(self._free_queue()),
                        hashes=tuple(None if b.block_hash is None else bytes(b.block_hash)
                                     for b in blocks[1:]),
                        tables={i: self._tables(i) for i in sorted(live)})

    def check(self) -> None:
        snap = self._snapshot()
        for i, r in enumerate(self.reqs):
            if not r.live and any(self._tables(i)):
                raise Violation(Family.LEAK, f"r{i} is {r.status} but holds blocks",
                                observed=self._tables(i))
        holders: Counter[int] = Counter()
        owner: dict[int, tuple[int, int, int]] = {}
        for i, tables in snap.tables.items():
            for g, table in enumerate(tables):
                for pos, block in enumerate(table):
                    if block == NULL:
                        continue
                    holders[block] += 1
                    seen = owner.setdefault(block, (i, g, pos))
                    if seen[1:] != (g, pos):
                        raise Violation(Family.LEAK, f"block {block} serves two places at once "
                                        "(group, block index)", expected=seen,
                                        observed=(i, g, pos))
        ref = {b: snap.ref[b - 1] for b in range(1, self.config.num_blocks)}
        want = {b: holders.get(b, 0) for b in ref}
        if ref != want:
            diff = {b: (want[b], ref[b]) for b in ref if ref[b] != want[b]}
            raise Violation(Family.RC, "ref_cnt must equal the request-table entries holding "
                            "the block (expected, observed)", observed=diff)
        free = sorted(snap.free)
        unreferenced = sorted(b for b, n in ref.items() if n == 0)
        if free != unreferenced:
            raise Violation(Family.LEAK, "the free queue holds exactly the unreferenced blocks",
                            expected=unreferenced, observed=free)
        if self.config.events and not self.duplicated:
            self.duplicated = any(len(blocks) > 1 for blocks in self._pool_keys().values())
        if self.pool.get_num_free_blocks() != len(free):
            raise Violation(Family.FREE, "get_num_free_blocks() counts the free queue",
                            expected=len(free), observed=self.pool.get_num_free_blocks())
        for i, r in enumerate(self.reqs):
            if r.status in ("waiting", "preempted"):
                self._probe_hit(i)
            if not r.live:
                continue
            upto = r.scheduled[0] if r.scheduled is not None else r.computed
            check_reads(self.shadow, self.ids, r, snap.tables[i], self.geo,
                        [self.geo.needed(g, upto, upto) for g in range(len(self.geo.windows))],
                        pending_ok=True, what=f"running r{i}")

    def _probe_hit(self, i: int) -> None:
        """The hit a waiting request would get now (``get_computed_blocks`` changes nothing
        without stats and full event reports), checked as if it were scheduled."""
        blocks, hit, _ = self._call(self.mgr.get_computed_blocks, self.handles[i])
        tables = tuple(tuple(t) for t in blocks.get_block_ids())
        try:
            check_hit(self.shadow, self.ids, self.reqs[i], hit, tables, self.geo)
        except Violation:
            self._t(f"hit_blocks, hit, _ = mgr.get_computed_blocks(r{i})\n"
                    f"print('r{i} hit', hit, hit_blocks.get_block_ids())  # {hit}, "
                    f"{[list(t) for t in tables]}")
            raise

    def _check_allocation(self, i: int, tables: Tables, hit_tables: Tables, start: int,
                          upto: int) -> None:
        upto = min(upto, self.config.max_model_len)
        for g, table in enumerate(tables):
            bs = self.geo.block_sizes[g]
            for p in self.geo.needed(g, upto, start):
                if p // bs >= len(table) or table[p // bs] == NULL:
                    raise Violation(Family.TABLE, f"allocate_slots: group {g} of r{i} has no "
                                    f"block for position {p} (to compute or look ahead)",
                                    observed=table)
            for k, block in enumerate(hit_tables[g]):
                if block != NULL and table[k] not in (block, NULL):
                    raise Violation(Family.TABLE, f"allocate_slots: group {g} of r{i} must "
                                    f"start with its hit blocks", expected=hit_tables[g],
                                    observed=table)

    def _check_no_side_effects(self, before: Snapshot, after: Snapshot, i: int,
                               start: int) -> None:
        """``None`` from allocate_slots: only blocks wholly outside a window may be freed."""
        freed: Counter[int] = Counter()
        for g, (old, new) in enumerate(zip(before.tables[i], after.tables[i], strict=True)):
            window = self.geo.windows[g]
            bs = self.geo.block_sizes[g]
            limit = 0 if window is None else max(0, start - (window - 1)) // bs
            for k, block in enumerate(old):
                now = new[k] if k < len(new) else None
                if now != block and not (now == NULL and k < limit):
                    raise Violation(Family.ATOMIC, "allocate_slots returned None but changed "
                                    f"r{i}'s group {g} table", expected=old, observed=new)
                if now != block:
                    freed[block] += 1
            if len(new) != len(old):
                raise Violation(Family.ATOMIC, "allocate_slots returned None but changed "
                                f"r{i}'s group {g} table", expected=old, observed=new)
        ref = tuple(n + freed.get(b, 0) for b, n in enumerate(after.ref, start=1))
        released = {b for b in freed if after.ref[b - 1] == 0}
        queue = tuple(b for b in after.free if b not in released)
        other = {k: v for k, v in after.tables.items() if k != i}
        if (ref, queue, after.hashes, other) != (before.ref, before.free, before.hashes,
                                                 {k: v for k, v in before.tables.items()
                                                  if k != i}):
            parts = [name for name, a, b in (("ref_cnt", ref, before.ref),
                                              ("free queue", queue, before.free),
                                              ("block hashes", after.hashes, before.hashes))
                     if a != b]
            raise Violation(Family.ATOMIC, "allocate_slots returned None but changed "
                            + (", ".join(parts) or "other requests' tables"),
                            expected=(before.ref, before.free), observed=(after.ref, after.free))


def run_program(target: ManagerTarget, config: ManagerConfig,
                program: Sequence[ops.ROp], step_timeout: float | None = None
                ) -> RequestExecutor:
    """Replay ``program`` (raises the first :class:`Violation`)."""
    ex = RequestExecutor(target, config, step_timeout)
    ex.check()
    for op in program:
        ex.step(op)
    return ex
