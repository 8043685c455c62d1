"""Stand-in requests, full-state snapshots and the invariant checker for the v1 pool tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prefixcache.v1.core.block_pool import BlockPool
from prefixcache.v1.core.kv_cache_utils import (
    BlockHash,
    get_block_hash,
    get_group_id,
    get_request_block_hasher,
    maybe_convert_block_hash,
)
from prefixcache.v1.hashing import sha256


@dataclass
class FakeLoRA:
    """The fields of ``vllm.lora.request.LoRARequest`` the pool and hasher read."""

    lora_name: str
    lora_int_id: int
    lora_path: str = ""

    @property
    def adapter_id(self) -> int:
        return self.lora_int_id

    @property
    def name(self) -> str:
        return self.lora_name


@dataclass
class FakePosition:
    offset: int
    length: int


@dataclass
class FakeFeature:
    identifier: str
    mm_position: FakePosition


@dataclass
class FakeRequest:
    """Duck-typed ``vllm.v1.request.Request``: hashes are extended as tokens arrive."""

    request_id: str
    all_token_ids: list[int]
    hash_block_size: int
    hash_fn: Callable[[Any], bytes] = sha256
    lora_request: FakeLoRA | None = None
    cache_salt: str | None = None
    mm_features: list[FakeFeature] = field(default_factory=list)
    prompt_embeds: Any = None
    lookahead: int = 0
    session_id: str | None = None
    block_hashes: list[BlockHash] = field(default_factory=list)
    _prompt_embeds_per_block_hashes: dict[tuple[int, int], bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._hasher = get_request_block_hasher(self.hash_block_size, self.hash_fn, self.lookahead)
        self.block_hashes.extend(self._hasher(self))

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    def append(self, tokens: Sequence[int]) -> None:
        self.all_token_ids.extend(tokens)
        self.block_hashes.extend(self._hasher(self))


def snapshot(pool: BlockPool) -> dict[str, Any]:
    """Everything a failed call must leave unchanged."""
    return {
        "blocks": [
            (b.block_id, b.ref_cnt, b.block_hash, b.block_hash_num_tokens, b.is_null)
            for b in pool.blocks
        ],
        "queue": [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
        "num_free": pool.get_num_free_blocks(),
        "map": {
            key: ((blocks.block_id,) if not isinstance(blocks, dict) else tuple(blocks))
            for key, blocks in pool.cached_block_hash_to_block._cache.items()
        },
        "aliases": {k: dict(v) for k, v in pool.cached_block_hashes_by_block.items()},
        "events": list(pool.kv_event_queue),
        "watchers": sorted(pool._reuse_watchers),
    }


def check_invariants(pool: BlockPool) -> None:
    """The invariants stated in ``prefixcache/v1/core/block_pool.py``."""
    queued = pool.free_block_queue.get_all_free_blocks()
    assert len(queued) == pool.get_num_free_blocks()
    queued_ids = {b.block_id for b in queued}
    assert len(queued_ids) == len(queued)
    null = pool.null_block
    assert null is pool.blocks[0] and null.is_null
    assert null.block_id not in queued_ids and null.block_hash is None
    for block in pool.blocks[1:]:
        assert block.ref_cnt >= 0, block
        in_queue = block.block_id in queued_ids
        assert in_queue == (block.ref_cnt == 0), block
        assert (block.prev_free_block is not None) == in_queue
    # map <-> block keys, in both directions
    reached: dict[int, set[bytes]] = {}
    for key, blocks in pool.cached_block_hash_to_block._cache.items():
        members = [blocks] if not isinstance(blocks, dict) else list(blocks.values())
        assert members, key
        for block in members:
            assert pool.blocks[block.block_id] is block and not block.is_null
            reached.setdefault(block.block_id, set()).add(key)
    # the group-0 mirror holds exactly group 0's keys, by bare hash, each to its first block
    cache_map = pool.cached_block_hash_to_block
    assert {
        key[:-4]: id(cache_map.get_one_block(key))
        for key in cache_map._cache
        if get_group_id(key) == 0
    } == {h: id(block) for h, block in cache_map._group0.items()}
    for block in pool.blocks:
        keys: set[bytes] = set()
        if block.block_hash is not None:
            keys.add(block.block_hash)
        aliases = pool.cached_block_hashes_by_block.get(block.block_id, {})
        assert not aliases or block.block_hash is not None
        keys |= set(aliases)
        assert keys == reached.get(block.block_id, set()), block
        lengths = [block.block_hash_num_tokens, *aliases.values()] if keys else []
        assert len(lengths) == len(set(lengths)), (block, lengths)


def map_keys(pool: BlockPool) -> set[tuple[Any, int]]:
    """The cache map's keys as a ``KVEventReplica`` holds them."""
    return {
        (maybe_convert_block_hash(get_block_hash(key)), get_group_id(key))
        for key in pool.cached_block_hash_to_block._cache
    }


def queue_ids(pool: BlockPool) -> list[int]:
    return [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]
