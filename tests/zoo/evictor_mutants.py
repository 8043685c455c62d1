"""Broken eviction order. Every ``# BUG`` line is the one change from the bundled evictor."""

from __future__ import annotations

from prefixcache.errors import NoFreeBlocksError
from prefixcache.evictor import LRUEvictor
from tests.zoo.plumbing import PluggableAllocator


class ArrivalOrderEvictor(LRUEvictor):
    """Assumes candidates arrive in last-access order, so the first one added is evicted."""

    def evict(self) -> tuple[int, int]:
        if not self.free_table:
            raise NoFreeBlocksError("no evictable block")
        block_id = next(iter(self.free_table))  # BUG: was the heap's minimum key
        meta = self.free_table.pop(block_id)
        self._maybe_compact()
        return block_id, meta.content_hash


class DepthBlindEvictor(LRUEvictor):
    """The tie rule ignores the hashed-token count: equal times go to the earliest added."""

    def add(
        self, block_id: int, content_hash: int, num_hashed_tokens: int, last_accessed: float
    ) -> None:
        super().add(block_id, content_hash, 0, last_accessed)  # BUG: depth dropped


class ArrivalOrderAllocator(PluggableAllocator):
    evictor_class = ArrivalOrderEvictor


class DepthBlindAllocator(PluggableAllocator):
    evictor_class = DepthBlindEvictor
