"""Broken allocators only the engine-side operations catch (``CommonComputedIds``,
``HitBurst``). Each change is marked ``# BUG`` in the patched source.
"""

from __future__ import annotations

from tests.zoo.patching import Patch

#: The common computed ids of a batch are its shortest non-empty list, not the common prefix:
#: a sequence whose blocks differ is told it shares blocks it never computed.
COMMON_COMPUTED_SHORTEST = (Patch(
    "prefix_caching_block", "PrefixCachingBlockAllocator.get_common_computed_block_ids",
    "first = lists[0]",
    "return list(sorted(lists, key=len)[0])  # BUG: was the common prefix of the lists\n"
    "first = lists[0]"),)

#: Completing a window of 1000 queries drops the totals: the hit rate is that of the queries
#: since (the window's own hits are forgotten).
HIT_RATE_WINDOW_FORGETS = (Patch("common", "CacheMetricData.query",
                                 "self.num_completed_blocks += 1",
                                 "self.num_completed_blocks += 1\n"
                                 "self.num_queries = self.num_hits = 0  # BUG: extra line"),)
