"""Broken engine trackers (``ComputedBlocksTracker``): only one-tracker edits
(``SeqTrackerEdit``) and tracker misuse (``SeqLostBlocks``) reach them. Each change is marked
``# BUG`` in the patched source.
"""

from __future__ import annotations

from tests.zoo.patching import Patch

_TRACKER = "ComputedBlocksTracker"

#: ``add_seq`` of a sequence it tracks starts its list again instead of refusing.
TRACKER_READDS = (Patch("prefix_caching_block", f"{_TRACKER}.add_seq",
                        "if seq_id in self._cached_computed_seq_blocks:",
                        'if False:  # BUG: no "already tracked" check'),)

#: ``get_cached_computed_blocks_and_update`` of a sequence that lost blocks returns the list
#: it remembers (ids the sequence no longer holds) instead of refusing.
TRACKER_KEEPS_LOST_BLOCKS = (Patch(
    "prefix_caching_block", f"{_TRACKER}.get_cached_computed_blocks_and_update",
    'raise InvalidArgumentError("the sequence lost blocks since the last call")',
    "return prev_computed  # BUG: the sequence lost blocks: must raise"),)

#: ``BlockTable.free`` frees block after block and only notices a block freed behind it when
#: the allocator refuses that one (the blocks before it are gone by then).
TABLE_FREE_BEFORE_CHECK = (Patch("block_table", "BlockTable.free",
                                 "with contextlib.suppress(NotImplementedError):\n"
                                 "    self._held_handles(real)",
                                 "pass  # BUG: no check that every block still holds its id"),)
