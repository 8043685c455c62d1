"""Replaying KV events: what a router learns from ``take_events()`` must be the cache map.

Events carry keys, not block ids, so a router keeps the set of ``(hash, group)`` keys the pool
can serve: ``BlockStored`` adds each hash, ``BlockRemoved`` drops it, ``AllBlocksCleared``
forgets everything. After every take the set must be exactly the keys the map holds (a key
held by several blocks stays until the last one goes; vLLM's own test pins per-copy removals
instead, which makes a key-set router drop keys the pool still serves). A ``BlockRemoved`` of
a key the router does not hold is inconsistent. A stored block's parent must be a key the
router holds, None, a key the events themselves told the router is gone (``evict_blocks`` of
a held block, whose children are keyed later: the router knows that prefix was dropped), or
the hash of a position the request holds no cached block for (a window's null or a masked
block, which no event can announce). A parent never announced is an orphan: the router cannot
place the block. Releases whose events carry no
group (0.11) are replayed as group 0; int hashes (vLLM's default) are compared in int form.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence

from models.core.invariants import Violation
from models.families.v1.invariants import Family
from models.families.v1.pool_model import Key


def external(block_hash: bytes) -> int:
    """The 64-bit int form events carry when a pool publishes int hashes (vLLM's default)."""
    return int.from_bytes(block_hash, "big") & ((1 << 64) - 1)


class Replay:
    """A router's view of one pool, built only from its events (bytes or int hashes)."""

    def __init__(self) -> None:
        self.keys: set[tuple[object, int]] = set()
        self.dropped: set[tuple[object, int]] = set()  # announced, then removed or cleared
        self.ints = False

    def apply(self, events: Iterable[object], unannounceable: Container[object] = ()) -> None:
        """Replay ``events``; ``unannounceable``: hashes (either form) no event can store."""
        for event in events:
            kind = type(event).__name__
            group = getattr(event, "group_idx", None) or 0
            hashes = list(getattr(event, "block_hashes", ()))
            self.ints = self.ints or any(isinstance(h, int) for h in hashes)
            if kind == "BlockStored":
                parent = getattr(event, "parent_block_hash", None)
                if (parent is not None and (parent, group) not in self.keys
                        and (parent, group) not in self.dropped
                        and parent not in unannounceable):
                    raise Violation(Family.CACHE, "event replay: BlockStored names a parent "
                                    "hash the router does not hold", observed=(parent, group))
                self.keys.update((h, group) for h in hashes)
            elif kind == "BlockRemoved":
                for h in hashes:
                    if (h, group) not in self.keys:
                        raise Violation(Family.CACHE, "event replay: BlockRemoved of a key "
                                        "the router does not hold", observed=(h, group))
                    self.keys.discard((h, group))
                    self.dropped.add((h, group))
            elif kind == "AllBlocksCleared":
                self.dropped |= self.keys
                self.keys.clear()
            else:
                raise Violation(Family.TARGET, f"unknown KV event {kind}", observed=event)

    def check(self, keys: Mapping[Key, Sequence[int]]) -> None:
        want = {(external(h) if self.ints else h, g) for (h, g), v in keys.items() if v}
        if self.keys != want:
            raise Violation(Family.CACHE, "event replay disagrees with the cache map (keys "
                            "it can serve)", expected=sorted(map(repr, want - self.keys)),
                            observed=sorted(map(repr, self.keys - want)))
