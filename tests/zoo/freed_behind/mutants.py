"""The allocators of the freed-behind mutants: a device-aware allocator (unchanged) whose
package carries the broken ``BlockTable``, and a GPU allocator (unchanged) whose module
carries a broken ``ComputedBlocksTracker``."""

from __future__ import annotations

from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.prefix_caching_block import ComputedBlocksTracker as _ComputedBlocksTracker
from prefixcache.prefix_caching_block import LastAccessBlocksTracker
from prefixcache.utils import Device
from tests.zoo.plumbing import PluggableAllocator

__all__ = ["ComputedBlocksTracker", "Device", "LastAccessBlocksTracker", "LostBlocksAllocator",
           "TableFreeUncheckedDevice"]


class TableFreeUncheckedDevice(CpuGpuBlockAllocator):
    """The bundled allocator; its package's ``BlockTable.free`` frees before it checks."""


class ComputedBlocksTracker(_ComputedBlocksTracker):
    """``get_cached_computed_blocks_and_update`` of a sequence that lost blocks returns the
    list it remembers (ids the sequence no longer holds) instead of refusing."""

    def get_cached_computed_blocks_and_update(self, seq_id: int,
                                              block_ids: list[int]) -> list[int]:
        entry = self._cached_computed_seq_blocks.get(seq_id)
        if entry is not None and not entry[1] and block_ids \
                and len(entry[0]) > len(block_ids) - 1:
            return entry[0]  # BUG: the sequence lost blocks: must raise
        return super().get_cached_computed_blocks_and_update(seq_id, block_ids)


class LostBlocksAllocator(PluggableAllocator):
    """The bundled allocator; its module carries the broken tracker."""
