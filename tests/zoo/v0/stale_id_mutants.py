"""Broken allocators only stale id lists and swaps of shared ids reach (``MarkStaleIds``,
the block-level ``swap_shared`` rule). Each change is marked ``# BUG`` in the patched source.
"""

from __future__ import annotations

from tests.zoo.patching import Patch

_MARK = "PrefixCachingBlockAllocator.mark_blocks_as_accessed"

#: ``mark_blocks_as_accessed`` stamps held ids only: an evictable id keeps its old rank.
STALE_MARK_SKIPS_EVICTOR = (Patch(
    "prefix_caching_block", _MARK, "elif block_id in evictor:\n    evictable.append(block_id)",
    "elif block_id in evictor:\n    pass  # BUG: an evictable id keeps its old rank"),)

#: ``mark_blocks_as_accessed`` skips free ids instead of refusing them.
STALE_MARK_IGNORES_FREE_IDS = (Patch(
    "prefix_caching_block", _MARK,
    'raise InvalidBlockError(f"block id {block_id} is free; it cannot be accessed")',
    "pass  # BUG: a free id is ignored, not an error"),)

#: ``swap`` moves each block on its own: handles sharing a source id get one destination id
#: each, and the mapping keeps only the last pair per source id.
SWAP_SPLITS_SHARED_IDS = (Patch(
    "cpu_gpu_block_allocator", "CpuGpuBlockAllocator.swap", "src = self._allocator_for(src_device)",
    'ids = [getattr(b, "block_id", None) for b in blocks] if isinstance(blocks, list) else []\n'
    "if len(set(ids)) != len(ids):  # BUG: one swap per block, not per source id\n"
    "    split: dict[int, int] = {}\n"
    "    for block in blocks:\n"
    "        split.update(self.swap([block], src_device, dst_device))\n"
    "    return split\n"
    "src = self._allocator_for(src_device)"),)
