"""KV-cache events, with the field names of upstream's ``vllm.distributed.kv_events``.

Plain dataclasses (upstream's are msgspec structs published over ZMQ; the engine is not a
dependency here). ``KVEventReplica`` is what a router keeps: the set of
``(external block hash, group_idx)`` keys the pool has announced. The bundled pool's contract
is that replaying its events into a replica always yields exactly the keys of its cache map:
``BlockStored`` adds keys (idempotent), ``BlockRemoved`` is emitted only when a key has no block
left, ``AllBlocksCleared`` empties the replica.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MEDIUM_CPU",
    "MEDIUM_GPU",
    "MEDIUM_STORAGE",
    "AllBlocksCleared",
    "BlockRemoved",
    "BlockStored",
    "ExternalBlockHash",
    "KVCacheEvent",
    "KVEventReplica",
]

ExternalBlockHash = bytes | int

MEDIUM_GPU = "GPU"
MEDIUM_CPU = "CPU"
MEDIUM_STORAGE = "STORAGE"


@dataclass
class KVCacheEvent:
    """Base class of every KV-cache event."""


@dataclass
class BlockStored(KVCacheEvent):
    """Blocks became reachable under ``block_hashes`` (one entry per block, chained from
    ``parent_block_hash``); ``token_ids`` are those blocks' tokens, ``block_size`` per block."""

    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None


@dataclass
class BlockRemoved(KVCacheEvent):
    """The keys ``block_hashes`` (in group ``group_idx``) no longer reach any block."""

    block_hashes: list[ExternalBlockHash]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


@dataclass
class AllBlocksCleared(KVCacheEvent):
    """Every key was dropped (``reset_prefix_cache``)."""


class KVEventReplica:
    """A consumer's view of the cache map, rebuilt from events only.

    ``keys`` holds ``(external hash, group_idx)`` pairs. Set semantics: storing a present key is a
    no-op, removing drops it. Any other event type raises ``TypeError``.
    """

    def __init__(self) -> None:
        self.keys: set[tuple[ExternalBlockHash, int | None]] = set()

    def apply(self, events: Iterable[KVCacheEvent]) -> None:
        """Replay ``events`` in order."""
        for event in events:
            if isinstance(event, BlockStored):
                for block_hash in event.block_hashes:
                    self.keys.add((block_hash, event.group_idx))
            elif isinstance(event, BlockRemoved):
                for block_hash in event.block_hashes:
                    self.keys.discard((block_hash, event.group_idx))
            elif isinstance(event, AllBlocksCleared):
                self.keys.clear()
            else:
                raise TypeError(f"not a KV cache event: {event!r}")
