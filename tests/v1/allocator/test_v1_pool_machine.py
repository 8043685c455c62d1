"""The v1 pool driven by generated engine-like programs, side by side with a small model of
its contract: refcounts, free-queue order (LRU; keyless blocks first; among blocks freed
together, the given order, i.e. the chain tail first), the key -> blocks map with duplicates,
and the event stream (replaying it must give exactly the map's keys after every step)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from prefixcache.v1.core.block_pool import BlockPool
from prefixcache.v1.core.kv_cache_utils import KVCacheBlock, make_block_hash_with_group_id
from prefixcache.v1.errors import NoFreeBlocksError
from prefixcache.v1.kv_events import KVEventReplica

from ._support import FakeRequest, check_invariants, map_keys, queue_ids, snapshot

BLOCK = 2
NUM_BLOCKS = 9
#: Prompts from a tiny vocabulary over a few shared stems, so prefixes collide often.
STEMS = [[1, 2, 3, 4], [1, 2, 5, 6], [7, 8]]
PROMPTS = st.tuples(st.sampled_from(STEMS), st.lists(st.integers(1, 3), max_size=5)).map(
    lambda p: p[0] + p[1]
)


@dataclass
class Running:
    req: FakeRequest
    blocks: list[KVCacheBlock] = field(default_factory=list)
    num_cached: int = 0


class PoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pool = BlockPool(
            NUM_BLOCKS, enable_caching=True, hash_block_size=BLOCK, enable_kv_cache_events=True
        )
        self.queue: list[int] = list(range(1, NUM_BLOCKS))
        self.ref: dict[int, int] = dict.fromkeys(range(1, NUM_BLOCKS), 0)
        self.keys: dict[bytes, list[int]] = {}
        self.block_keys: dict[int, bytes] = {}
        self.running: list[Running] = []
        self.replica = KVEventReplica()
        self.serial = 0

    # --- model helpers -----------------------------------------------------------------

    def _drop_keys(self, block_id: int) -> None:
        key = self.block_keys.pop(block_id, None)
        if key is not None:
            self.keys[key].remove(block_id)
            if not self.keys[key]:
                del self.keys[key]

    def _allocate(self, run: Running, needed: int) -> bool:
        before = snapshot(self.pool)
        if needed > len(self.queue):
            try:
                self.pool.get_new_blocks(needed)
            except NoFreeBlocksError:
                assert snapshot(self.pool) == before
                return False
            raise AssertionError("get_new_blocks handed out more blocks than were free")
        got = self.pool.get_new_blocks(needed)
        assert [b.block_id for b in got] == self.queue[:needed]
        for block in got:
            self.queue.pop(0)
            self._drop_keys(block.block_id)
            self.ref[block.block_id] = 1
        run.blocks.extend(got)
        return True

    def _cache(self, run: Running) -> None:
        num_full = min(len(run.req.all_token_ids) // BLOCK, len(run.blocks))
        self.pool.cache_full_blocks(run.req, run.blocks, run.num_cached, num_full, BLOCK, 0)
        for i in range(run.num_cached, num_full):
            key = make_block_hash_with_group_id(run.req.block_hashes[i], 0)
            block_id = run.blocks[i].block_id
            if self.block_keys.get(block_id) != key:
                self.keys.setdefault(key, []).append(block_id)
                self.block_keys[block_id] = key
        run.num_cached = max(run.num_cached, num_full)

    def _blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // BLOCK)

    # --- rules -------------------------------------------------------------------------

    @rule(prompt=PROMPTS, use_hits=st.booleans())
    def start_request(self, prompt: list[int], use_hits: bool) -> None:
        self.serial += 1
        run = Running(FakeRequest(f"r{self.serial}", list(prompt), BLOCK))
        hits: list[KVCacheBlock] = []
        if use_hits:
            # The last token is always recomputed, as engines do.
            for block_hash in run.req.block_hashes[: (len(prompt) - 1) // BLOCK]:
                found = self.pool.get_cached_block(block_hash, [0])
                key = make_block_hash_with_group_id(block_hash, 0)
                expected = self.keys.get(key)
                assert (found is None) == (expected is None)
                if found is None:
                    break
                assert expected is not None and found[0].block_id == expected[0]
                hits.append(found[0])
        needed = self._blocks_for(len(prompt)) - len(hits)
        if needed > len(self.queue) - sum(1 for b in hits if self.ref[b.block_id] == 0):
            return  # would not fit once the hits leave the queue; engines check first
        self.pool.touch(hits)
        for block in hits:
            if self.ref[block.block_id] == 0:
                self.queue.remove(block.block_id)
            self.ref[block.block_id] += 1
        run.blocks = list(hits)
        run.num_cached = len(hits)
        assert self._allocate(run, needed)
        self._cache(run)
        self.running.append(run)

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 50), tokens=st.lists(st.integers(1, 3), min_size=1, max_size=3))
    def decode(self, index: int, tokens: list[int]) -> None:
        run = self.running[index % len(self.running)]
        run.req.append(tokens)
        needed = self._blocks_for(len(run.req.all_token_ids)) - len(run.blocks)
        if needed > 0 and not self._allocate(run, needed):
            del run.req.all_token_ids[-len(tokens) :]  # preempted instead: roll the step back
            run.req.block_hashes[:] = run.req.block_hashes[: len(run.req.all_token_ids) // BLOCK]
            return
        self._cache(run)

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 50), reverse=st.booleans())
    def finish(self, index: int, reverse: bool) -> None:
        run = self.running.pop(index % len(self.running))
        order = list(reversed(run.blocks)) if reverse else list(run.blocks)
        self.pool.free_blocks(order)
        first: list[int] = []
        last: list[int] = []
        for block in order:
            self.ref[block.block_id] -= 1
            if self.ref[block.block_id] == 0:
                (last if block.block_id in self.block_keys else first).append(block.block_id)
        self.queue = first + self.queue + last

    @rule(ids=st.sets(st.integers(0, NUM_BLOCKS - 1), max_size=3))
    def evict(self, ids: set[int]) -> None:
        self.pool.evict_blocks(ids)
        for block_id in sorted(ids):
            self._drop_keys(block_id)

    @rule()
    def reset(self) -> None:
        idle = not self.running
        assert self.pool.reset_prefix_cache() is idle
        if idle:
            self.keys.clear()
            self.block_keys.clear()

    # --- checks ------------------------------------------------------------------------

    @invariant()
    def agrees_with_model(self) -> None:
        check_invariants(self.pool)
        assert queue_ids(self.pool) == self.queue
        assert {b.block_id: b.ref_cnt for b in self.pool.blocks[1:]} == self.ref
        cache = self.pool.cached_block_hash_to_block._cache
        got = {
            k: [v.block_id] if isinstance(v, KVCacheBlock) else list(v) for k, v in cache.items()
        }
        assert got == self.keys

    @invariant()
    def events_replay_to_the_map(self) -> None:
        self.replica.apply(self.pool.take_events())
        assert self.replica.keys == map_keys(self.pool)


TestPoolMachine = PoolMachine.TestCase
TestPoolMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
