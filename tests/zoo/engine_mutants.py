"""Broken allocators only the engine-side operations catch (``CommonComputedIds``,
``HitBurst``): each overrides one method of the bundled ``PrefixCachingBlockAllocator``."""

from __future__ import annotations

from typing import Any

from prefixcache.common import CacheMetricData
from tests.zoo.plumbing import PluggableAllocator


class CommonComputedShortest(PluggableAllocator):
    """The common computed ids of a batch are its shortest non-empty list, not the common
    prefix: a sequence whose blocks differ is told it shares blocks it never computed."""

    def get_common_computed_block_ids(self, computed_seq_block_ids: list[list[int]]) -> list[int]:
        lists: list[list[int]] = [list(ids) for ids in computed_seq_block_ids if ids]
        if len(computed_seq_block_ids) == 1 or not lists:
            return super().get_common_computed_block_ids(computed_seq_block_ids)
        return sorted(lists, key=len)[0]  # BUG: was the common prefix of the lists


class WindowForgettingMetric(CacheMetricData):
    """Completing a window of 1000 queries drops the totals: the rate is that of the
    queries since (the window's own hits are forgotten)."""

    def query(self, hit: bool) -> None:
        super().query(hit)
        if self.num_incompleted_block_queries == 0:
            self.num_queries = self.num_hits = 0  # BUG: extra line


class HitRateWindowForgets(PluggableAllocator):
    """The hit rate restarts from zero after every 1000 queries."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.metric_data = WindowForgettingMetric()
