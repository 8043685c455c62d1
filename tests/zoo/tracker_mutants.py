"""Broken engine trackers (``ComputedBlocksTracker``): only one-tracker edits
(``SeqTrackerEdit``) reach them.

The suite's adapter takes the trackers from the module of the GPU allocator's class, so this
module defines that class (the bundled allocator, unchanged) next to the broken tracker.
"""

from __future__ import annotations

from prefixcache.prefix_caching_block import ComputedBlocksTracker as _ComputedBlocksTracker
from prefixcache.prefix_caching_block import LastAccessBlocksTracker
from tests.zoo.plumbing import PluggableAllocator

__all__ = ["ComputedBlocksTracker", "LastAccessBlocksTracker", "TrackedAllocator"]


class ComputedBlocksTracker(_ComputedBlocksTracker):
    """``add_seq`` of a sequence it tracks starts its list again instead of refusing."""

    def add_seq(self, seq_id: int) -> None:
        self._cached_computed_seq_blocks[seq_id] = ([], False)  # BUG: no "already tracked"


class TrackedAllocator(PluggableAllocator):
    """The bundled allocator; its module carries the broken tracker."""
