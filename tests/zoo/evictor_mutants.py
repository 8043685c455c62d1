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


# --------------------------------------------------------------------------- evictor level
# Bugs in the evictor's own contract (API.md section 6) that allocator-level programs rarely
# or never show: only the evictor machine (``properties.machines.evictor_level``) drives them.

_SHALLOW = 2**40  # above any token count: ``_SHALLOW - n`` ranks the fewest tokens first


class ShallowTieEvictor(LRUEvictor):
    """Equal times go to the fewest hashed tokens (the tie rule inverted); metadata is right."""

    def add(
        self, block_id: int, content_hash: int, num_hashed_tokens: int, last_accessed: float
    ) -> None:
        super().add(block_id, content_hash, _SHALLOW - num_hashed_tokens, last_accessed)  # BUG
        self.free_table[block_id].num_hashed_tokens = num_hashed_tokens


class ForwardOnlyUpdateEvictor(LRUEvictor):
    """``update`` assumes the clock never goes back: an older time is ignored."""

    def update(self, block_id: int, last_accessed: float) -> None:
        meta = self.free_table.get(block_id)
        if meta is not None and last_accessed < meta.last_accessed:  # BUG: older times dropped
            return
        super().update(block_id, last_accessed)


class CountedEvictor(LRUEvictor):
    """Keeps its own candidate count; ``remove`` forgets to decrement it."""

    def __init__(self) -> None:
        super().__init__()
        self._count = 0

    def add(
        self, block_id: int, content_hash: int, num_hashed_tokens: int, last_accessed: float
    ) -> None:
        super().add(block_id, content_hash, num_hashed_tokens, last_accessed)
        self._count += 1

    def evict(self) -> tuple[int, int]:
        victim = super().evict()
        self._count -= 1
        return victim

    def remove(self, block_id: int) -> None:
        super().remove(block_id)  # BUG: self._count is not decremented

    @property
    def num_blocks(self) -> int:
        return self._count


class LaxRemoveEvictor(LRUEvictor):
    """``remove`` of a non-candidate is silently ignored (API.md: ``ValueError``)."""

    def remove(self, block_id: int) -> None:
        if block_id in self.free_table:  # BUG: absent ids pass without an error
            super().remove(block_id)


class ShallowTieAllocator(PluggableAllocator):
    evictor_class = ShallowTieEvictor


class ForwardOnlyUpdateAllocator(PluggableAllocator):
    evictor_class = ForwardOnlyUpdateEvictor


class CountedAllocator(PluggableAllocator):
    evictor_class = CountedEvictor


class LaxRemoveAllocator(PluggableAllocator):
    evictor_class = LaxRemoveEvictor
