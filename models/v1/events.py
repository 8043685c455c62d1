"""Replaying KV events: what a router learns from ``take_events()`` must be the cache map.

Events carry keys, not block ids, so a consumer can rebuild at most how many blocks hold
each key: ``BlockStored`` adds one holder per hash, ``BlockRemoved`` takes one away,
``AllBlocksCleared`` forgets everything. A stored block's parent must be a key the router
holds (or None), or it cannot place the block in its prefix tree. Releases whose events
carry no group (0.11) are replayed as group 0. The replayed counts must equal the
model's, key by key, at every take.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from models.families import Family, Violation
from models.v1.pool_model import Key


class Replay:
    """A router's view of one pool, built only from its events."""

    def __init__(self) -> None:
        self.holders: Counter[Key] = Counter()

    def apply(self, events: Iterable[object]) -> None:
        for event in events:
            kind = type(event).__name__
            group = getattr(event, "group_idx", None) or 0
            if kind == "BlockStored":
                parent = getattr(event, "parent_block_hash", None)
                if parent is not None and self.holders[(parent, group)] <= 0:
                    raise Violation(Family.CACHE, "event replay: BlockStored names a parent "
                                    "hash the router does not hold", observed=(parent, group))
                for h in getattr(event, "block_hashes", ()):
                    self.holders[(h, group)] += 1
            elif kind == "BlockRemoved":
                for h in getattr(event, "block_hashes", ()):
                    if self.holders[(h, group)] <= 0:
                        raise Violation(Family.CACHE, "event replay: BlockRemoved of a key "
                                        "no stored event announced", observed=(h, group))
                    self.holders[(h, group)] -= 1
            elif kind == "AllBlocksCleared":
                self.holders.clear()
            else:
                raise Violation(Family.TARGET, f"unknown KV event {kind}", observed=event)
        self.holders = +self.holders  # drop zero counts

    def check(self, keys: Mapping[Key, Sequence[int]]) -> None:
        want = Counter({k: len(v) for k, v in keys.items() if v})
        if self.holders != want:
            extra = {k: n for k, n in self.holders.items() if want.get(k) != n}
            missing = {k: n for k, n in want.items() if self.holders.get(k) != n}
            raise Violation(Family.CACHE, "event replay disagrees with the cache map "
                            "(holders per key)", expected=missing, observed=extra)
