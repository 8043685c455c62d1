"""Broken allocators only stale id lists and swaps of shared ids reach (``MarkStaleIds``,
the block-level ``swap_shared`` rule).

``Device`` is imported here on purpose: the suite's adapter reads ``Device`` from the module
of the allocator's class.
"""

from __future__ import annotations

from prefixcache._validation import checked_list
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.errors import UnknownBlockIdError
from prefixcache.interfaces import Block
from prefixcache.utils import Device
from tests.zoo.plumbing import PluggableAllocator

__all__ = ["Device", "StaleMarkIgnoresFreeIds", "StaleMarkSkipsEvictor", "SwapSplitsSharedIds"]


class StaleMarkSkipsEvictor(PluggableAllocator):
    """``mark_blocks_as_accessed`` stamps held ids only: an evictable id keeps its old rank."""

    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None:
        ids = checked_list(block_ids, "block_ids")
        held = [i for i in ids if type(i) is not int or i not in self.evictor]  # BUG: was ids
        super().mark_blocks_as_accessed(held, now)


class StaleMarkIgnoresFreeIds(PluggableAllocator):
    """``mark_blocks_as_accessed`` skips free ids instead of refusing them."""

    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None:
        trackers = self._block_tracker
        ids = checked_list(block_ids, "block_ids")
        if any(i not in trackers for i in ids if type(i) is int):
            raise UnknownBlockIdError("block id does not belong to this allocator")
        kept = [i for i in ids if type(i) is not int or trackers[i].active
                or i in self.evictor]  # BUG: a free id is ignored, not an error
        super().mark_blocks_as_accessed(kept, now)


class SwapSplitsSharedIds(CpuGpuBlockAllocator):
    """``swap`` moves each block on its own: handles sharing a source id get one destination
    id each, and the mapping keeps only the last pair per source id."""

    def swap(self, blocks: list[Block], src_device: Device, dst_device: Device) -> dict[int, int]:
        ids = [getattr(b, "block_id", None) for b in blocks] if isinstance(blocks, list) else []
        if len(set(ids)) == len(ids):
            return super().swap(blocks, src_device, dst_device)
        mapping: dict[int, int] = {}
        for block in blocks:  # BUG: one swap per block, not per source id
            mapping.update(super().swap([block], src_device, dst_device))
        return mapping
