"""Differential tests against vLLM 0.33.0's own ``BlockPool`` and request hasher, loaded from its
wheel (``_upstream_v1``): on engine-like programs (no misuse, no duplicate announcements, no
LoRA) the bundled pool must hand out the same block ids, keep the same queue order, refcounts
and cache map, and the bundled hasher must produce the same hashes. The departures listed in
``prefixcache/v1/DEPARTURES.md`` are outside these programs by construction, except LoRA, which
is checked to differ."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import prefixcache.v1.core.kv_cache_utils as bundled_utils
from prefixcache.v1.core.block_pool import BlockPool
from prefixcache.v1.hashing import sha256 as bundled_sha256

from ._support import FakeFeature, FakeLoRA, FakePosition, FakeRequest
from ._upstream_v1 import WHEEL_ENV, find_wheel, load

WHEEL = find_wheel()
pytestmark = pytest.mark.skipif(
    WHEEL is None,
    reason=f"vllm 0.33.0 wheel not found: set {WHEEL_ENV} to its path "
    "(python -m properties.upstream fetch vllm-v1)",
)
UPSTREAM = load(WHEEL) if WHEEL is not None else None

HBS = 2
GROUP_SIZES = (2, 4)  # group 0 at the hash block size, group 1 twice as coarse
NUM_BLOCKS = 16
STEMS = [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 7, 7], [8, 8]]
PROMPTS = st.tuples(st.sampled_from(STEMS), st.lists(st.integers(1, 3), max_size=6)).map(
    lambda p: p[0] + p[1]
)


@pytest.fixture
def upstream_none_hash() -> Iterator[Any]:
    """Both hashers seeded with upstream's pickle-based sha256; the bundled seed restored after."""
    assert UPSTREAM is not None
    UPSTREAM.kv_cache_utils.init_none_hash(UPSTREAM.hashing.sha256)
    bundled_utils.init_none_hash(UPSTREAM.hashing.sha256)
    try:
        yield UPSTREAM.hashing.sha256
    finally:
        bundled_utils.init_none_hash(bundled_sha256)


def _upstream_hashes(req: FakeRequest, hash_fn: Any, lookahead: int) -> list[bytes]:
    assert UPSTREAM is not None
    hasher = UPSTREAM.kv_cache_utils.get_request_block_hasher(HBS, hash_fn, lookahead)
    shadow = FakeRequest(
        req.request_id,
        [],
        HBS,
        hash_fn,
        req.lora_request,
        req.cache_salt,
        req.mm_features,
        req.prompt_embeds,
    )
    hashes: list[bytes] = []
    for token in req.all_token_ids:  # incrementally, as the engine appends tokens
        shadow.all_token_ids.append(token)
        shadow.block_hashes = hashes
        hashes.extend(hasher(shadow))
    return hashes


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tokens=st.lists(st.integers(0, 5), max_size=14),
    salt=st.none() | st.sampled_from(["s", "t"]),
    spans=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), max_size=3),
    embeds=st.booleans(),
    lookahead=st.integers(0, 2),
)
def test_hasher_matches_upstream(
    upstream_none_hash: Any,
    tokens: list[int],
    salt: str | None,
    spans: list[tuple[int, int]],
    embeds: bool,
    lookahead: int,
) -> None:
    feats, offset = [], 0
    for gap, length in spans:
        offset += gap
        feats.append(FakeFeature(f"m{offset}", FakePosition(offset, length)))
        offset += length
    prompt_embeds = bytes(range(len(tokens))) if embeds else None
    ours = FakeRequest(
        "r",
        list(tokens),
        HBS,
        upstream_none_hash,
        cache_salt=salt,
        mm_features=feats,
        prompt_embeds=prompt_embeds,
        lookahead=lookahead,
    )
    assert ours.block_hashes == _upstream_hashes(ours, upstream_none_hash, lookahead)


def test_lora_keys_differ_from_upstream_by_design(upstream_none_hash: Any) -> None:
    lora = FakeLoRA("a", 7, "/p")
    ours = FakeRequest("r", [1, 2, 3, 4], HBS, upstream_none_hash, lora_request=lora)
    theirs = _upstream_hashes(ours, upstream_none_hash, 0)
    assert len(theirs) == 2 and ours.block_hashes[0] != theirs[0]  # DEPARTURES.md item 4


class Ids(list[int]):
    """Block ids standing for a list of each pool's own blocks."""


@dataclass
class One:
    """A block id standing for each pool's own block."""

    block_id: int


@dataclass
class Running:
    req: FakeRequest
    blocks: list[list[int]] = field(default_factory=lambda: [[] for _ in GROUP_SIZES])
    cached: list[int] = field(default_factory=lambda: [0 for _ in GROUP_SIZES])


class DifferentialMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        assert UPSTREAM is not None
        self.ours = BlockPool(NUM_BLOCKS, True, HBS, enable_kv_cache_events=True)
        self.theirs = UPSTREAM.block_pool.BlockPool(
            NUM_BLOCKS, True, HBS, enable_kv_cache_events=True
        )
        self.running: list[Running] = []
        self.serial = 0

    def _both(self, method: str, *args: Any) -> Any:
        """Call ``method`` on both pools, blocks named by ``Ids`` (a list) or ``One`` (a block);
        the results (block ids for blocks, or the error) must agree."""
        results = []
        for pool in (self.ours, self.theirs):
            real = [
                [pool.blocks[i] for i in a]
                if isinstance(a, Ids)
                else pool.blocks[a.block_id]
                if isinstance(a, One)
                else a
                for a in args
            ]
            try:
                out = getattr(pool, method)(*real)
            except ValueError as error:
                out = ("ValueError", str(type(error).__mro__[-2].__name__))
            if isinstance(out, list):
                out = [b.block_id for b in out]
            results.append(out)
        assert results[0] == results[1], (method, args, results)
        return results[0]

    def _fits(self, needed: int, hits: list[list[int]]) -> bool:
        queued_hits = {i for group in hits for i in group if self.ours.blocks[i].ref_cnt == 0}
        return needed <= self.ours.get_num_free_blocks() - len(queued_hits)

    def _cache(self, run: Running) -> None:
        for g, size in enumerate(GROUP_SIZES):
            full = min(len(run.req.all_token_ids) // size, len(run.blocks[g]))
            if full > run.cached[g]:
                self._both(
                    "cache_full_blocks", run.req, Ids(run.blocks[g]), run.cached[g], full, size, g
                )
                run.cached[g] = full

    @rule(prompt=PROMPTS, use_hits=st.booleans())
    def start(self, prompt: list[int], use_hits: bool) -> None:
        self.serial += 1
        run = Running(FakeRequest(f"r{self.serial}", list(prompt), HBS))
        hits: list[list[int]] = [[] for _ in GROUP_SIZES]
        if use_hits:
            for g, size in enumerate(GROUP_SIZES):
                coarse = bundled_utils.resolve_block_hashes(run.req.block_hashes, HBS, size)
                for i in range((len(prompt) - 1) // size):
                    found = self._both("get_cached_block", coarse[i], [g])
                    if found is None:
                        break
                    hits[g].extend(found)
        needed = sum(-(-len(prompt) // s) - len(h) for s, h in zip(GROUP_SIZES, hits, strict=True))
        if not self._fits(needed, hits):
            return
        for g, size in enumerate(GROUP_SIZES):
            self._both("touch", Ids(hits[g]))
            run.blocks[g] = list(hits[g])
            run.cached[g] = len(hits[g])
            run.blocks[g] += self._both("get_new_blocks", -(-len(prompt) // size) - len(hits[g]))
        self._cache(run)
        self.running.append(run)

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 50), tokens=st.lists(st.integers(1, 3), min_size=1, max_size=3))
    def decode(self, index: int, tokens: list[int]) -> None:
        run = self.running[index % len(self.running)]
        total = len(run.req.all_token_ids) + len(tokens)
        needed = [-(-total // s) - len(b) for s, b in zip(GROUP_SIZES, run.blocks, strict=True)]
        if not self._fits(sum(n for n in needed if n > 0), [[]]):
            self._both("get_new_blocks", NUM_BLOCKS)  # both refuse alike
            return
        run.req.append(tokens)
        for g, n in enumerate(needed):
            if n > 0:
                run.blocks[g] += self._both("get_new_blocks", n)
        self._cache(run)

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 50), reverse=st.booleans())
    def finish(self, index: int, reverse: bool) -> None:
        run = self.running.pop(index % len(self.running))
        for blocks in run.blocks:
            self._both("free_blocks", Ids(reversed(blocks)) if reverse else Ids(blocks))

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 50), units=st.integers(1, 12))
    def partial_entry(self, index: int, units: int) -> None:
        run = self.running[index % len(self.running)]
        size = GROUP_SIZES[1]
        num_tokens = units * HBS
        if num_tokens % size == 0 or units > len(run.req.block_hashes):
            return  # engines key block boundaries with cache_full_blocks
        block_index = (num_tokens - 1) // size
        if block_index >= len(run.blocks[1]) or block_index < run.cached[1]:
            return
        block_id = run.blocks[1][block_index]
        self._both("cache_partial_block", run.req, One(block_id), num_tokens, 1, size)

    @rule(ids=st.sets(st.integers(0, NUM_BLOCKS - 1), max_size=3))
    def evict(self, ids: set[int]) -> None:
        self._both("evict_blocks", ids)

    @rule()
    def reset(self) -> None:
        self._both("reset_prefix_cache")

    @invariant()
    def same_state(self) -> None:
        def state(pool: Any) -> Any:
            cache = pool.cached_block_hash_to_block._cache
            return (
                [(b.ref_cnt, b.block_hash, b.block_hash_num_tokens) for b in pool.blocks],
                [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
                {k: [v.block_id] if hasattr(v, "block_id") else list(v) for k, v in cache.items()},
                {k: set(v) for k, v in pool.cached_block_hashes_by_block.items() if v},
                pool.get_num_free_blocks(),
                pool.get_usage(),
            )

        assert state(self.ours) == state(self.theirs)


TestDifferential = DifferentialMachine.TestCase
TestDifferential.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


@settings(max_examples=150, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 5), min_size=4, max_size=20),
    salt=st.none() | st.just("s"),
    lora=st.booleans(),
    spans=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5)), max_size=3),
    lookahead=st.integers(0, 2),
    coarse=st.booleans(),
    split=st.integers(0, 4),
)
def test_stored_and_removed_events_match_upstream(
    tokens: list[int],
    salt: str | None,
    lora: bool,
    spans: list[tuple[int, int]],
    lookahead: int,
    coarse: bool,
    split: int,
) -> None:
    """Where no block is skipped, duplicated or re-announced, both pools emit equal events:
    ``BlockStored`` (hashes, parent, tokens, extra keys, LoRA fields, lookahead tokens) from
    ``cache_full_blocks`` in one or two calls, ``emit_cached_block_events`` for present keys, and
    ``BlockRemoved`` when the blocks are reused."""
    assert UPSTREAM is not None
    feats, offset = [], 0
    for gap, length in spans:
        offset += gap
        feats.append(FakeFeature(f"m{offset}", FakePosition(offset, length)))
        offset += length
    req = FakeRequest(
        "r",
        list(tokens),
        HBS,
        cache_salt=salt,
        mm_features=feats,
        lookahead=lookahead,
        lora_request=FakeLoRA("a", 3, "/p") if lora else None,
    )
    size = 2 * HBS if coarse else HBS
    full = len(bundled_utils.resolve_block_hashes(req.block_hashes, HBS, size))
    split = min(split, full)
    events = []
    for pool in (
        BlockPool(12, True, HBS, enable_kv_cache_events=True, num_hash_lookahead_tokens=lookahead),
        UPSTREAM.block_pool.BlockPool(
            12, True, HBS, enable_kv_cache_events=True, num_hash_lookahead_tokens=lookahead
        ),
    ):
        blocks = pool.get_new_blocks(max(full, 1))
        pool.cache_full_blocks(req, blocks, 0, split, size, 1)
        pool.cache_full_blocks(req, blocks, split, full, size, 1)
        pool.emit_cached_block_events(req, full, size, 1)
        pool.free_blocks(list(reversed(blocks)))
        pool.get_new_blocks(pool.get_num_free_blocks())
        events.append(pool.take_events())
    assert events[0] == events[1]
    kinds = {type(event).__name__ for event in events[0]}
    assert full == 0 or kinds == {"BlockStored", "BlockRemoved"}
