"""Broken extension queries of the device-aware allocator (``get_block_refcount``,
``get_block_device``): only ``BlockInfo`` reaches them. The change is marked ``# BUG``.
"""

from __future__ import annotations

from tests.zoo.patching import Patch

#: ``get_block_refcount`` says whether an id is held, not by how many holders.
REFCOUNT_CAPS_AT_ONE = (Patch(
    "cpu_gpu_block_allocator", "CpuGpuBlockAllocator.get_block_refcount",
    "return self._allocator_of_id(block_id).get_block_refcount(block_id)",
    "return min(self._allocator_of_id(block_id).get_block_refcount(block_id), 1)  # BUG"),)
