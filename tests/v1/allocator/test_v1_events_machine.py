"""Generated interleavings of every v1 pool operation, valid or not, with fine-grained hashing
(``hash_block_size`` 2, block sizes 2 and 4), two groups, partial entries, aliases, key moves
and the null block. After every step: the pool's invariants hold, replaying the events gives
exactly the cache map's keys, and a call that raised left the pool unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from prefixcache.errors import PrefixCacheError
from prefixcache.v1.core.block_pool import BlockPool
from prefixcache.v1.core.kv_cache_utils import KVCacheBlock
from prefixcache.v1.kv_events import KVEventReplica

from ._support import FakeRequest, check_invariants, map_keys, snapshot

HBS = 2
NUM_BLOCKS = 10
PROMPTS = [[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 9, 9, 9, 9], [5, 5, 5, 5, 5, 5]]
picks = st.integers(0, 1000)
#: Outcome counts, to see that both valid and refused calls are generated.
OUTCOMES: dict[str, int] = {}


class KeysMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pool = BlockPool(
            NUM_BLOCKS, enable_caching=True, hash_block_size=HBS, enable_kv_cache_events=True
        )
        self.requests = [FakeRequest(f"r{i}", list(p), HBS) for i, p in enumerate(PROMPTS)]
        self.held: list[KVCacheBlock] = []  # one entry per reference this test holds
        self.replica = KVEventReplica()
        self.reused: list[int] = []

    def _call(self, fn: Callable[[], Any]) -> tuple[bool, Any]:
        """Run ``fn``: ``(True, result)``, or ``(False, None)`` after a typed error, which must
        have changed nothing."""
        before = snapshot(self.pool)
        try:
            result = fn()
        except PrefixCacheError as error:
            assert snapshot(self.pool) == before
            OUTCOMES[type(error).__name__] = OUTCOMES.get(type(error).__name__, 0) + 1
            return False, None
        OUTCOMES["ok"] = OUTCOMES.get("ok", 0) + 1
        return True, result

    def _block(self, pick: int) -> KVCacheBlock:
        return self.pool.blocks[pick % NUM_BLOCKS]

    @rule(n=st.integers(0, 4))
    def allocate(self, n: int) -> None:
        ok, got = self._call(lambda: self.pool.get_new_blocks(n))
        if ok:
            assert all(b.ref_cnt == 1 and b.block_hash is None for b in got)
            self.held.extend(got)
        else:
            assert n > self.pool.get_num_free_blocks()

    @rule(
        r=picks,
        picks_=st.lists(picks, min_size=1, max_size=4),
        start=st.integers(0, 3),
        group=st.integers(0, 1),
        coarse=st.booleans(),
        mask=st.none() | st.lists(st.booleans()),
    )
    def cache_full(
        self,
        r: int,
        picks_: list[int],
        start: int,
        group: int,
        coarse: bool,
        mask: list[bool] | None,
    ) -> None:
        req = self.requests[r % len(self.requests)]
        blocks = [self._block(p) for p in picks_]
        bs = 2 * HBS if coarse else HBS
        full = min(len(blocks), len(req.block_hashes) * HBS // bs)
        start = min(start, full)
        mask = None if mask is None else (mask + [True] * full)[: full - start]
        self._call(lambda: self.pool.cache_full_blocks(req, blocks, start, full, bs, group, mask))

    @rule(r=picks, p=picks, units=st.integers(1, 4), group=st.integers(0, 1), replace=st.booleans())
    def cache_partial(self, r: int, p: int, units: int, group: int, replace: bool) -> None:
        req = self.requests[r % len(self.requests)]
        block = self._block(p)
        self._call(
            lambda: self.pool.cache_partial_block(req, block, units * HBS, group, 4, replace)
        )

    @rule(r=picks, n=st.integers(0, 4), group=st.integers(0, 1))
    def emit_cached(self, r: int, n: int, group: int) -> None:
        req = self.requests[r % len(self.requests)]
        self._call(lambda: self.pool.emit_cached_block_events(req, n, HBS, group))

    @rule(ps=st.lists(picks, max_size=3))
    def touch(self, ps: list[int]) -> None:
        blocks = [self._block(p) for p in ps]
        ok, _ = self._call(lambda: self.pool.touch(blocks))
        assert ok  # every pool block may be touched (a free one is taken off the queue)
        self.held.extend(b for b in blocks if not b.is_null)

    @rule(ps=st.lists(picks, max_size=4), from_held=st.booleans())
    def free(self, ps: list[int], from_held: bool) -> None:
        if from_held and self.held:
            chosen = [self.held[p % len(self.held)] for p in ps]
        else:
            chosen = [self._block(p) for p in ps]
        before = snapshot(self.pool)
        try:
            self.pool.free_blocks(chosen)
        except PrefixCacheError:
            assert snapshot(self.pool) == before
            return
        for block in chosen:
            if not block.is_null:
                self.held.remove(block)

    @rule(ps=st.lists(picks, max_size=3))
    def unpin(self, ps: list[int]) -> None:
        if not self.held:
            return
        chosen = [self.held[p % len(self.held)] for p in ps]
        before = snapshot(self.pool)
        try:
            self.pool.unpin_blocks(chosen, lambda b: self.reused.append(b.block_id))
        except PrefixCacheError:
            assert snapshot(self.pool) == before
            return
        for block in chosen:
            self.held.remove(block)

    @rule(ids=st.lists(st.integers(-1, NUM_BLOCKS), max_size=3))
    def evict(self, ids: list[int]) -> None:
        self._call(lambda: self.pool.evict_blocks(ids))

    @rule(src=picks, dst=picks, targeted=st.booleans())
    def move(self, src: int, dst: int, targeted: bool) -> None:
        source, target = self._block(src), self._block(dst)
        if targeted:  # a keyed source and a keyless target: the move engines make
            keyed = [b for b in self.pool.blocks if b.block_hash is not None]
            keyless = [b for b in self.pool.blocks[1:] if b.block_hash is None]
            if keyed and keyless:
                source, target = keyed[src % len(keyed)], keyless[dst % len(keyless)]
        self._call(lambda: self.pool.move_block_hashes(source, target))

    @rule()
    def reset(self) -> None:
        before = snapshot(self.pool)
        if not self.pool.reset_prefix_cache():
            assert snapshot(self.pool) == before
            assert any(b.ref_cnt for b in self.pool.blocks[1:])

    @rule(p=picks)
    def misuse_foreign(self, p: int) -> None:
        fake = KVCacheBlock(p % NUM_BLOCKS)
        for fn in (
            lambda: self.pool.touch([fake]),
            lambda: self.pool.free_blocks([fake]),
            lambda: self.pool.cache_partial_block(self.requests[0], fake, 2, 0, 2),
        ):
            before = snapshot(self.pool)
            try:
                fn()
            except PrefixCacheError:
                assert snapshot(self.pool) == before
            else:
                raise AssertionError("a hand-made block was accepted")

    @invariant()
    def consistent(self) -> None:
        check_invariants(self.pool)
        self.replica.apply(self.pool.take_events())
        assert self.replica.keys == map_keys(self.pool)
        held_counts: dict[int, int] = {}
        for block in self.held:
            held_counts[block.block_id] = held_counts.get(block.block_id, 0) + 1
        assert {b.block_id: b.ref_cnt for b in self.pool.blocks[1:] if b.ref_cnt} == held_counts


TestKeysMachine = KeysMachine.TestCase
TestKeysMachine.settings = settings(max_examples=200, stateful_step_count=50, deadline=None)
