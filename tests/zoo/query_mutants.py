"""Broken extension queries of the device-aware allocator (``get_block_refcount``,
``get_block_device``): only ``BlockInfo`` reaches them.

``Device`` is imported here on purpose: the suite's adapter reads ``Device`` from the module
of the allocator's class.
"""

from __future__ import annotations

from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.utils import Device

__all__ = ["Device", "RefcountCapsAtOne"]


class RefcountCapsAtOne(CpuGpuBlockAllocator):
    """``get_block_refcount`` says whether an id is held, not by how many holders."""

    def get_block_refcount(self, block_id: int) -> int:
        return min(super().get_block_refcount(block_id), 1)  # BUG: was the count itself
