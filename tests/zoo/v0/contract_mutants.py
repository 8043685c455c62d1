"""Patches with upstream's computed answers where the contract departs from them
(docs/CONTRACT.md): an aborted block's unwritten KV reported computed, and
computed ids with holes."""

from __future__ import annotations

from tests.zoo.patching import Patch

#: A cached id released before any mark is not remembered as unwritten: it counts as computed
#: while evictable and is revived computed by a hit, although no batch ever wrote its KV.
FREED_UNWRITTEN_STAYS_COMPUTED = (Patch(
    "prefix_caching_block", "PrefixCachingBlockAllocator._release",
    "self._unwritten.add(block_id)",
    "pass  # BUG: forgets that an aborted block's KV was never written"),)

#: ``get_computed_block_ids`` skips an uncomputed id and goes on (upstream's filter), so an
#: evicted head leaves computed ids after a hole.
COMPUTED_IDS_WITH_HOLES = (Patch(
    "prefix_caching_block", "PrefixCachingBlockAllocator.get_computed_block_ids",
    "prev_computed_block_ids.extend(considered[:run])",
    "prev_computed_block_ids.extend(  # BUG: every computed id, not the leading run\n"
    "    i for i, computed in zip(considered, flags, strict=True) if computed)"),)
