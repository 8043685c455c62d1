"""Chunk status and the cache-policy interface (upstream ``cpu/policies/base.py``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

from prefixcache.v1.kv_offload.base import OffloadKey, ReqContext

__all__ = ["CachePolicy", "ChunkStatus", "order_request_keys"]


def order_request_keys(key_groups: Sequence[Sequence[OffloadKey]], req_context: ReqContext
                       ) -> list[OffloadKey]:
    """The keys of all groups in one head-to-tail order: by end-token position when every key
    has one (stable), else group by group as given."""
    keys = [key for group in key_groups for key in group]
    positions = req_context.offload_key_positions
    if all(key in positions for key in keys):
        keys.sort(key=positions.__getitem__)
    return keys


class ChunkStatus:
    """One chunk slot: ``ref_cnt`` is -1 while its write is pending, 0 when evictable, and
    n > 0 while n loads read it."""

    __slots__ = ("chunk_id", "ref_cnt")

    def __init__(self, chunk_id: int) -> None:
        self.ref_cnt = -1
        self.chunk_id = chunk_id

    @property
    def is_ready(self) -> bool:
        """Whether the chunk holds its content (its write completed)."""
        return self.ref_cnt >= 0

    def __repr__(self) -> str:
        return f"ChunkStatus(chunk_id={self.chunk_id}, ref_cnt={self.ref_cnt})"


class CachePolicy(ABC):
    """Organises the resident chunks and chooses victims. The manager owns reference counts
    and the chunk pool; a policy never frees a chunk itself."""

    def __init__(self, cache_capacity: int) -> None:
        self.cache_capacity = cache_capacity
        #: Every resident key's chunk; a policy keeps it exact (the manager reads it).
        self.chunks: dict[OffloadKey, ChunkStatus] = {}

    def get(self, key: OffloadKey) -> ChunkStatus | None:
        """The chunk of ``key``, None if not resident."""
        return self.chunks.get(key)

    def resident(self) -> Iterable[tuple[OffloadKey, ChunkStatus]]:
        """Every resident (key, chunk), in no particular order."""
        return self.chunks.items()

    @abstractmethod
    def insert(self, key: OffloadKey, chunk: ChunkStatus, req_context: ReqContext) -> None:
        """Add a newly allocated chunk (``key`` not resident)."""

    def insert_all(self, keys: Sequence[OffloadKey], chunks: Sequence[ChunkStatus],
                   req_context: ReqContext) -> None:
        """``insert`` each key with its chunk, in order (one call per store)."""
        for key, chunk in zip(keys, chunks, strict=True):
            self.insert(key, chunk, req_context)

    @abstractmethod
    def remove(self, key: OffloadKey) -> None:
        """Drop a resident key (a failed write)."""

    def on_store_miss(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        """Observe keys about to be inserted (once per request), before insertion."""
        return

    def on_request_access(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        """Observe a request's first use of ``keys`` (provisional recency)."""
        return

    @abstractmethod
    def on_request_finished(self, key_groups: Sequence[Sequence[OffloadKey]],
                            insertion_only_keys: set[OffloadKey],
                            reused_keys: set[OffloadKey], req_context: ReqContext) -> None:
        """Commit one request's accesses, head to tail per group."""

    @abstractmethod
    def evict(self, n: int, protected: set[OffloadKey]
              ) -> list[tuple[OffloadKey, ChunkStatus]] | None:
        """Remove exactly ``n`` evictable (``ref_cnt == 0``) chunks not in ``protected`` and
        return them, or return None and change nothing when fewer exist."""

    @abstractmethod
    def clear(self) -> None:
        """Forget every chunk and all adaptive state."""
