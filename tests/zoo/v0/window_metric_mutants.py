"""Patches with two upstream defects of docs/CONTRACT.md: a swap-in counted as a cache query
(HIT), and sliding-window tables whose swap refuses or moves the null block, or whose window
drop leaves the first kept block linked to the freed one."""

from __future__ import annotations

from tests.zoo.patching import Patch

#: ``swap_in`` counts every full block it re-registers by content as a cache query, a hit on a
#: cached id and a miss otherwise (upstream): a swap round trip moves the hit rate although no
#: request was admitted.
SWAP_IN_COUNTS_QUERIES = (Patch(
    "prefix_caching_block", "PrefixCachingBlockAllocator.swap_in",
    "cached_id = self._cached_blocks.get(content_hash)",
    "cached_id = self._cached_blocks.get(content_hash)\n"
    "self.metric_data.query(hit=cached_id is not None)  # BUG: a swap-in is no admission"),)

#: ``swap`` does not skip the null block: a table whose window dropped blocks cannot be swapped
#: (the null block appears twice, or is not the source device's), so swap preemption of a
#: long-context sliding-window sequence fails.
WINDOW_SWAP_REFUSES_NULL = (Patch(
    "cpu_gpu_block_allocator", "CpuGpuBlockAllocator.swap",
    "blocks = self._without_null(checked_blocks(blocks))",
    "blocks = checked_blocks(blocks)  # BUG: the null block is not skipped"),)

#: ``swap`` moves the block the null block wraps along with the table's blocks: the null
#: block's GPU id is released and it lands on the other device, under every table holding it.
WINDOW_SWAP_MOVES_NULL = (Patch(
    "cpu_gpu_block_allocator", "CpuGpuBlockAllocator.swap",
    "blocks = self._without_null(checked_blocks(blocks))",
    "blocks = checked_blocks(blocks)\n"
    "if self._null_block is not None and any(b is self._null_block for b in blocks):\n"
    "    # BUG: the block the null block wraps moves with the table\n"
    "    blocks = [self._null_block._proxy,\n"
    "              *(b for b in blocks if b is not self._null_block)]"),)

#: The window drop leaves the first kept block linked to the freed block before it
#: (upstream's drop): ``fork`` then walks out of the table, into the freed block or through
#: its recycled object.
WINDOW_DROP_KEEPS_LINK = (Patch(
    "block_table", "BlockTable._drop_window",
    "if dropped:\n    _detach_prev(blocks[end])",
    "pass  # BUG: the first kept block is not cut loose from the freed one"),)
