"""Broken device-aware allocators that only the table queries and sliding-window tables reach:
the id space, the swap log and the null block. Each change is marked ``# BUG``.
"""

from __future__ import annotations

from tests.zoo.patching import Patch

_DEVICE = "cpu_gpu_block_allocator"

#: ``get_physical_block_id`` returns the absolute id: CPU ids do not map onto ``0..C-1``.
PHYSICAL_ID_NOT_OFFSET = (Patch(
    _DEVICE, "CpuGpuBlockAllocator.get_physical_block_id",
    "return self._allocator_for(device).get_physical_block_id(absolute_id)",
    "self._allocator_for(device).get_physical_block_id(absolute_id)  # still validates\n"
    "return absolute_id  # BUG: was the position in the device's sorted ids"),)

#: ``get_and_reset_swaps`` returns the log but keeps it.
SWAP_LOG_NOT_RESET = (Patch(_DEVICE, "CpuGpuBlockAllocator.get_and_reset_swaps",
                            "self._swap_mapping = {}", "pass  # BUG: the log is not cleared"),)

#: ``free`` of the null block frees the GPU block it wraps (a sliding-window table's free
#: gives the null block's id back while it stays in use).
NULL_BLOCK_FREED = (Patch(
    _DEVICE, "CpuGpuBlockAllocator.free",
    "if type(block) not in _PLAIN_BLOCKS and isinstance(check_block(block), NullBlock):\n"
    "    return",
    "if type(block) not in _PLAIN_BLOCKS and isinstance(check_block(block), NullBlock):\n"
    "    if block._proxy.block_id is not None:  # BUG: the null block must be skipped\n"
    "        self.free(block._proxy)\n"
    "    return"),)

#: The null block takes tokens: ``append_token_ids`` writes into the GPU block it wraps (every
#: sliding-window table then shows them in its dropped entries).
NULL_BLOCK_WRITABLE = (Patch(_DEVICE, "NullBlock.append_token_ids",
                             'raise ImmutableBlockError("the null block cannot take tokens")',
                             "self._proxy.append_token_ids(token_ids)  # BUG: must refuse"),)

#: The ownership check of a device allocator's ``free`` reads ``block._owner`` without a
#: default: a block class without the attribute (the null block) crashes it instead of being
#: refused (``held_block_id``).
OWNER_READ_WITHOUT_DEFAULT = (Patch(
    "prefix_caching_block", "PrefixCachingBlockAllocator.free",
    "block_id = self._check_held(block)",
    '_ = block._owner  # BUG: was getattr(block, "_owner", None)\n'
    "block_id = self._check_held(block)"),)
