"""Runs a v1 program against a target and the model side by side; isolated misuse probes.

:meth:`Executor.step` applies one operation to both, checks the result and then the whole
observable state (refcounts, free queue and its order, primary keys, counters, and every key
any request can ask for through ``get_cached_block``). Programs replay without Hypothesis
(:func:`run_program`), which is what reproducers and the xfails file use.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from models.core.invariants import Violation
from models.families.v1 import ops
from models.families.v1.events import Replay, check_stored_tokens, external
from models.families.v1.invariants import Family
from models.families.v1.keys import check_keys
from models.families.v1.pool_model import PoolConfig, PoolModel
from properties.core import robustness
from properties.core.stepping import ProgramExecutor
from properties.families.v1.adapter import PoolAdapter, split_key
from properties.families.v1.router import open_router
from properties.families.v1.targets import PoolTarget


@dataclass(frozen=True, slots=True)
class Finding:
    """A robustness finding: misuse that changed the pool without raising (or raised late)."""

    target: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"[ROBUSTNESS] {self.target}: {self.kind}: {self.detail}"


class Executor(ProgramExecutor[ops.Op]):
    def __init__(self, target: PoolTarget, config: PoolConfig) -> None:
        super().__init__(target.step_timeout)
        self.target = target
        self.config = config
        self.model = PoolModel(config, target.model_caps)
        self.adapter = PoolAdapter(target, config)
        self.reqs: list[ops.Req] = []
        self.hashes: list[list[bytes]] = []
        self.replay = Replay()
        self.unannounceable: set[object] = set()  # hashes of null/masked (never keyed) blocks
        self.router = open_router(config)  # Dynamo's RadixTree, when its wheel is cached
        #: the concrete call of the last probe whose choices a script cannot redraw (block ids
        #: from the model's lists, a request): what :func:`robustness_script` renders
        self.probe_call: dict[str, Any] = {}

    def _program_json(self, program: list[ops.Op]) -> list[dict[str, Any]]:
        return ops.program_json(program)

    def _apply(self, op: ops.Op) -> Any:
        m, a = self.model, self.adapter
        if isinstance(op, ops.Req):
            self.reqs.append(op)
            self.hashes.append(self._call(a.add_request, op))
            check_keys(self.reqs, self.hashes, self.config.hash_block_size,
                       lookahead=self.config.lookahead)
            return len(self.reqs) - 1
        if isinstance(op, ops.GetNew):
            try:
                want = m.get_new_blocks(op.n)
            except ValueError:
                before = self._state(a.pool)
                try:
                    a.get_new_blocks(op.n)
                except ValueError:
                    after = self._state(a.pool)
                    if after != before:
                        raise Violation(Family.ATOMIC, f"failed get_new_blocks({op.n}) "
                                        f"changed the pool: {_diff(before, after)}") from None
                    return None
                except Exception as exc:
                    raise Violation(Family.CRASH, f"get_new_blocks({op.n}) over the free count "
                                    f"must raise ValueError, raised {exc!r}") from exc
                raise Violation(Family.FREE, f"get_new_blocks({op.n}) with {m.num_free} free "
                                "must raise ValueError") from None
            got = self._call(a.get_new_blocks, op.n)
            if sorted(got) != sorted(want) or len(set(got)) != len(got):
                raise Violation(Family.LRU if len(set(got)) == len(got) else Family.LEAK,
                                "get_new_blocks hands out the queue head", expected=want,
                                observed=got)
            a.check_handed_out(got)
            return got
        if isinstance(op, ops.Touch):
            m.touch(op.ids)
            return self._call(a.touch, op.ids)
        if isinstance(op, ops.Free):
            m.free_blocks(op.ids, op.evict_first)
            return self._call(a.free_blocks, op.ids, op.evict_first)
        if isinstance(op, ops.Unpin):
            m.unpin_blocks(op.ids)
            return self._call(a.unpin_blocks, op.ids)
        if isinstance(op, ops.MoveHashes):
            m.move_block_hashes(op.src, op.dst)
            return self._call(a.move_block_hashes, op.src, op.dst)
        if isinstance(op, ops.EmitCached):
            return self._call(a.emit_cached_block_events, op.req, op.num_cached, op.group)
        if isinstance(op, ops.CacheFull):
            scale = self.config.scale(op.group)
            for i in range(op.num_cached, op.num_full):
                if op.ids[i] == 0 or (op.mask is not None and not op.mask[i - op.num_cached]):
                    h = self.hashes[op.req][(i + 1) * scale - 1]
                    self.unannounceable.update((h, external(h)))
            m.cache_full_blocks(self.hashes[op.req], op.ids, op.num_cached, op.num_full, op.group,
                                op.mask)
            return self._call(a.cache_full_blocks, op.req, op.ids, op.num_cached, op.num_full,
                              op.group, op.mask)
        if isinstance(op, ops.CachePartial):
            # A partial block's event names as parent the key of the block before it (the hash
            # at its block's start); when the caller cached no block there, no event can
            # announce that key, as for a null block. Any other parent is an orphan.
            size = self.config.group_block_sizes[op.group]
            start = (op.num_tokens - 1) // size * size
            if start:
                h = self.hashes[op.req][start // self.config.hash_block_size - 1]
                if not m.keys.get((h, op.group)):
                    self.unannounceable.update((h, external(h)))
            want_key = m.cache_partial_block(self.hashes[op.req], op.id, op.num_tokens, op.group,
                                             op.replace)
            got_key = self._call(a.cache_partial_block, op.req, op.id, op.num_tokens, op.group,
                                 op.replace)
            got = split_key(got_key)
            if got != want_key:
                raise Violation(Family.CACHE, "cache_partial_block's returned key",
                                expected=want_key, observed=got)
            return got
        if isinstance(op, ops.Lookup):
            return self._lookup(self.hashes[op.req][op.index], op.groups)
        if isinstance(op, ops.Evict):
            m.evict_blocks(op.ids)
            return self._call(a.evict_blocks, op.ids)
        if isinstance(op, ops.Reset):
            want_ok = m.reset_prefix_cache()
            got_ok = self._call(a.reset_prefix_cache)
            if got_ok != want_ok:
                raise Violation(Family.CACHE, "reset_prefix_cache() succeeds iff nothing is "
                                "in use", expected=want_ok, observed=got_ok)
            return got_ok
        if isinstance(op, ops.TakeEvents):
            events = self._call(a.take_events)
            if self.config.events:
                self.replay.apply(events, self.unannounceable)
                self.replay.check(m.keys)
                self._check_stored_tokens(events)
                if self.router is not None:  # after the model's own checks, which it leaves
                    self.router.apply(events)
                    self.router.check(self.config, self.hashes, m.keys)
            return events
        if isinstance(op, ops.Probe):
            return self.probe(op.misuse, op.arg)
        raise TypeError(f"unknown operation {op!r}")

    def _lookup(self, hash_: bytes, groups: Sequence[int]) -> list[int] | None:
        want = self.model.lookup(hash_, groups)
        got: list[int] | None = self._call(self.adapter.get_cached_block, hash_, groups)
        ok = (got is None and want is None) or (
            got is not None and want is not None and len(got) == len(want)
            and all(g in w for g, w in zip(got, want, strict=True)))
        if not ok:
            raise Violation(Family.CACHE, f"get_cached_block(.., {list(groups)}): one block "
                            "holding the key per group, None on any miss", expected=want,
                            observed=got)
        return got

    def _check_stored_tokens(self, events: Iterable[Any]) -> None:
        """:func:`~models.families.v1.events.check_stored_tokens` over this program's
        requests."""
        check_stored_tokens(events, [r.tokens for r in self.reqs], self.hashes,
                            self.config.hash_block_size, self.config.lookahead)

    # ---------------------------------------------------------------- state check
    def check(self) -> None:
        self.model.compare(self.adapter.snapshot())
        fired, self.model.fired = self.model.fired, []
        reported = self.adapter.reused[:]
        self.adapter.reused.clear()
        if sorted(reported) != sorted(fired):
            raise Violation(Family.CONTENT, "unpin_blocks' on_reuse fires once per unpinned "
                            "block handed out again (or at a reset), never otherwise: its "
                            "reader must stop reading", expected=sorted(fired),
                            observed=sorted(reported))
        groups = range(len(self.config.group_block_sizes))
        for hs in self.hashes:
            for h in hs:
                for g in groups:
                    self._lookup(h, (g,))

    # ---------------------------------------------------------------- misuse probes
    def probe(self, kind: str, arg: int) -> Finding | None:
        """Apply misuse ``kind`` to a deep copy of the pool; the run's pool is untouched.

        A target claiming typed errors must raise one of them (else a ``CRASH``
        :class:`Violation`); one claiming atomicity must not change (else ``ATOMIC``); any
        other target that changes its state on misuse, with or without raising, yields a
        :class:`Finding`. The ``*_foreign`` kinds hand the copy a block of a second, fresh pool
        of the same target (engines run one pool per KV cache group set): both pools' states
        count.
        """
        caps = self.target.caps
        needs = {"evict": caps.evict_blocks, "unpin": caps.unpin_blocks,
                 "move": caps.move_block_hashes}
        if not needs.get(kind.split("_")[0], True):
            return None
        pool = copy.deepcopy(self.adapter.pool)
        other = self.target.create(self.config) if kind.endswith("_foreign") else None
        pools = [pool] if other is None else [pool, other]
        reused = len(self.adapter.reused)
        self.probe_call = {}
        before = tuple(self._state(p) for p in pools)
        blocks = pool.blocks
        foreign = [] if other is None else other.blocks
        free_ids = self.model.free
        calls: dict[str, Any] = {
            "double_free": lambda: pool.free_blocks([blocks[free_ids[arg % len(free_ids)]]])
            if free_ids else False,
            "negative_count": lambda: pool.get_new_blocks(-1 - arg % 2),
            "evict_out_of_range": lambda: pool.evict_blocks({self.config.num_blocks + arg}),
            "evict_negative": lambda: pool.evict_blocks({-1 - arg % 2}),
            "cache_beyond_hashes": lambda: self._cache_beyond(pool, arg),
            "unpin_unheld": lambda: self._unpin_unheld(pool, arg),
            "unpin_null": lambda: pool.unpin_blocks([pool.null_block], self.adapter.on_reuse),
            "move_onto_keyed": lambda: self._move_onto(pool, arg, keyed=True),
            "move_onto_null": lambda: self._move_onto(pool, arg, keyed=False),
            "touch_foreign": lambda: self._touch(pool, [foreign[1 + arg % (
                self.config.num_blocks - 1)]]) if self.config.num_blocks > 1 else False,
            "free_foreign": lambda: pool.free_blocks([foreign[1 + arg % (
                self.config.num_blocks - 1)]]) if self.config.num_blocks > 1 else False,
        }
        if kind not in calls:
            return None
        error: BaseException | None = None
        try:
            if calls[kind]() is False:
                del self.adapter.reused[reused:]
                return None  # nothing to misuse in this state
        except Exception as exc:
            error = exc
        del self.adapter.reused[reused:]  # the copy's reuse reports are not the run's
        after: Any
        try:
            after = tuple(self._state(p) for p in pools)
        except Violation as v:
            after = f"corrupted: {v.message}"
        if error is not None and self.target.misuse_types and not isinstance(
                error, self.target.misuse_types):
            raise Violation(Family.CRASH, f"misuse {kind} (arg {arg}): raised {error!r}, "
                            "not a typed error")
        if error is None and self.target.misuse_types:
            raise Violation(Family.CRASH, f"misuse {kind} (arg {arg}) raised nothing; the "
                            "target claims typed errors for misuse")
        if after != before and self.target.atomic:
            raise Violation(Family.ATOMIC, f"misuse {kind} (arg {arg}) changed a pool that "
                            f"claims failure atomicity: {_diff(before, after)}")
        if after == before:
            return None
        how = "raised " + type(error).__name__ + " but" if error is not None else "silently"
        finding = Finding(self.target.describe().split(" (")[0], kind,
                          f"{how} changed the pool (arg {arg}): {_diff(before, after)}")
        if not robustness.known(finding.target, kind):  # the core's report, with a replay
            from properties.families.v1.reproducer import robustness_script

            script = robustness_script(self.target, self.config, self.program, kind, arg,
                                       self.probe_call)
            robustness.report(robustness.Finding(finding.target, kind, finding.detail, script))
        return finding

    def _touch(self, pool: Any, blocks: list[Any]) -> None:
        pool.touch((blocks,) if self.target.caps.touch_per_group else blocks)

    def _unpin_unheld(self, pool: Any, arg: int) -> bool:
        """unpin_blocks of a held block (when there is one) then a free one, which the pool must
        refuse before dropping the first one's reference (``False``: no free block)."""
        if not self.model.free:
            return False
        held = [b for b, r in self.model.ref.items() if r > 0]
        ids = ([held[arg % len(held)]] if held else []) + [
            self.model.free[arg % len(self.model.free)]]
        self.probe_call = {"ids": ids}
        pool.unpin_blocks([pool.blocks[i] for i in ids], self.adapter.on_reuse)
        return True

    def _move_onto(self, pool: Any, arg: int, keyed: bool) -> bool:
        """move_block_hashes from a keyed block onto another keyed block (``keyed``) or onto
        the null block (``False``: no such blocks)."""
        holders = sorted(self.model.primary)
        if len(holders) < (2 if keyed else 1):
            return False
        src = holders[arg % len(holders)]
        dst = (pool.blocks[holders[(arg + 1) % len(holders)]] if keyed else pool.null_block)
        pool.move_block_hashes(pool.blocks[src], dst)
        return True

    def _cache_beyond(self, pool: Any, arg: int) -> bool:
        """cache_full_blocks with num_full beyond the request's hashes (``False``: too few
        free blocks to try)."""
        hashed = [r for r in self.adapter.requests if r.block_hashes]
        # A request with hashes, so a pool that keys some before it refuses shows it.
        req = hashed[arg % len(hashed)] if hashed else stand_in_request(self.adapter, 0)
        n = len(req.block_hashes) + 1 + arg % 2
        ids = self.model.free[:n]
        if len(ids) < n:
            return False
        self.probe_call = {"ids": list(ids), "num_full": n,
                           "req": self.adapter.requests.index(req) if hashed else None}
        pool.cache_full_blocks(req, [pool.blocks[i] for i in ids], 0, n,
                               self.config.group_block_sizes[0], 0)
        return True

    def _state(self, pool: Any) -> Any:
        snap = self.adapter.snapshot(pool)
        return (snap.ref, snap.free, snap.primary, snap.num_free)


def stand_in_request(adapter: PoolAdapter, index: int) -> Any:
    from properties.families.v1.adapter import stand_in

    if adapter.requests:
        return adapter.requests[index % len(adapter.requests)]
    return stand_in(0, ops.Req(tokens=()))


def _diff(before: Any, after: Any) -> str:
    """What differs between two states: one pool's (``_state``) or several pools' (a tuple of
    them, the second pool's parts named so)."""
    if isinstance(after, str):
        return after
    if before and isinstance(before[0], tuple):
        parts = [_diff(b, a)[len("changed "):] + (" of the other pool" if i else "")
                 for i, (b, a) in enumerate(zip(before, after, strict=True)) if b != a]
        return "changed " + "; ".join(parts)
    names = ("ref_cnt", "free queue", "block_hash", "num_free")
    parts = [n for n, b, a in zip(names, before, after, strict=True) if b != a]
    return "changed " + ", ".join(parts)


def run_program(target: PoolTarget, config: PoolConfig, program: Sequence[ops.Op]) -> Executor:
    """Replay ``program`` (raises the first :class:`Violation`)."""
    ex = Executor(target, config)
    ex.check()
    for op in program:
        ex.step(op)
    return ex
