"""The hit-rate windows of ``CacheMetricData`` (docs/API.md §4.3), derived from the query outcomes.

A query is an admission: one full block allocated by content (``allocate_immutable_block``,
a table's ``allocate``). A swap-in, fork, copy-on-write or promotion re-registers blocks the
engine already holds and is no query (upstream counts swap-ins: a defect the contract departs
from, ``docs/CONTRACT.md``).

Queries are grouped in windows of ``WINDOW``; a window completes on its ``WINDOW``-th query.
The fields a target shows (upstream's names): ``num_completed_blocks`` (windows completed),
``completed_block_cache_hit_rate`` (the running mean of their hit rates, ``(mean * n + rate) /
(n + 1)`` per completed window), ``num_incompleted_block_queries`` and
``num_incompleted_block_hit`` (the open window's queries and hits, in ``[0, WINDOW)``). The
counts are exact; the mean is compared within ``RATE_TOLERANCE`` (floating-point order).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Queries per window (the field upstream calls ``block_size``).
WINDOW = 1000
#: Absolute tolerance of the running mean (a rate in [0, 1], rounded once per window).
RATE_TOLERANCE = 1e-9

#: The window fields, in the order of ``HitWindow.fields`` and of the snapshot's tuples.
FIELDS = ("num_completed_blocks", "completed_block_cache_hit_rate",
          "num_incompleted_block_queries", "num_incompleted_block_hit")


@dataclass(slots=True)
class HitWindow:
    """One device's windows (see the module docstring)."""

    completed: int = 0
    mean: float = 0.0
    queries: int = 0
    hits: int = 0

    def record(self, hit: bool, count: int = 1) -> None:
        """``count`` queries, each a hit iff ``hit``, in order."""
        while count > 0:
            take = min(count, WINDOW - self.queries)
            count -= take
            self.queries += take
            if hit:
                self.hits += take
            if self.queries == WINDOW:
                rate = self.hits / self.queries
                self.mean = (self.mean * self.completed + rate) / (self.completed + 1)
                self.completed += 1
                self.queries = self.hits = 0

    def fields(self) -> tuple[int, float, int, int]:
        return self.completed, self.mean, self.queries, self.hits

    def differs(self, shown: tuple[object, ...]) -> bool:
        """Whether the target's ``shown`` fields (``FIELDS`` order) differ from the model's."""
        completed, mean, queries, hits = shown
        return (completed, queries, hits) != (self.completed, self.queries, self.hits) or \
            not isinstance(mean, int | float) or abs(float(mean) - self.mean) > RATE_TOLERANCE
