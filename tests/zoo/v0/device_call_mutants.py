"""Broken per-device surfaces: one device's own ``swap_in`` (docs/API.md §4.5) called directly, as
a custom swapper does. The device-aware ``swap`` checks the destination first, so only the
device-level calls (``DeviceSwap`` and its misuse variants, ``models.families.v0.ops.device``)
reach these. Patches of ``PrefixCachingBlockAllocator.swap_in``, each change marked ``# BUG``.
"""

from __future__ import annotations

from tests.zoo.patching import Patch

#: ``swap_in`` takes ids block by block without checking the free count first: when the
#: device runs out, the blocks before keep their new ids (docs/API.md's upstream behaviour, but
#: this allocator claims atomicity).
SWAP_IN_MIDWAY_FAILURE = (Patch(
    "prefix_caching_block", "PrefixCachingBlockAllocator.swap_in",
    "if self.get_num_free_blocks_needed_for_swap_in(blocks) > self.get_num_free_blocks():\n"
    "    raise NoFreeBlocksError()",
    "pass  # BUG: the free count is not checked first"),)

#: ``swap_in`` accepts a block that still holds an id: it gets a second id and the first one
#: stays referenced by nobody (a leak).
SWAP_IN_TAKES_HELD_BLOCKS = (Patch("prefix_caching_block", "PrefixCachingBlockAllocator.swap_in",
                                   "if block.block_id is not None:",
                                   "if False:  # BUG: a block that holds an id is taken"),)
