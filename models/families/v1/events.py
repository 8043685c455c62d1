"""Replaying KV events: what a router learns from ``take_events()`` must be the cache map
(the pool level replays a pool's events, the request level a ``KVCacheManager``'s).

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
from typing import Any

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


def check_stored_tokens(events: Iterable[Any], tokens: Sequence[Sequence[int]],
                        hashes: Sequence[Sequence[bytes]], hash_block_size: int,
                        lookahead: int = 0) -> None:
    """``BlockStored``: one ``block_size`` chunk of ``token_ids`` per hash, each chunk the
    tokens that hash names (a router pairs them by position); ``tokens[r]`` and ``hashes[r]``
    are request ``r``'s tokens and block hashes (one per ``hash_block_size`` tokens). With
    hash lookahead L each hash's ``lookahead_token_ids`` entry is the L tokens after its block,
    which its key covers too (without them a router cannot tell apart two blocks of equal
    tokens and parent); without lookahead there are none."""
    index: dict[object, tuple[int, int]] = {}
    for r, hs in enumerate(hashes):
        for i, h in enumerate(hs):
            index.setdefault(h, (r, i))
            index.setdefault(external(h), (r, i))
    for e in events:
        if type(e).__name__ != "BlockStored":
            continue
        size, token_ids = e.block_size, list(e.token_ids)
        if len(token_ids) != size * len(e.block_hashes):
            raise Violation(Family.CACHE, "BlockStored: token_ids must hold block_size "
                            "tokens per block hash", expected=size * len(e.block_hashes),
                            observed=(len(token_ids), e))
        ahead = getattr(e, "lookahead_token_ids", None)
        if (ahead is None) != (lookahead == 0) or (
                ahead is not None and len(ahead) != len(e.block_hashes)):
            raise Violation(Family.CACHE, "BlockStored: lookahead_token_ids holds one list "
                            "per block hash with hash lookahead on, None without",
                            expected=f"{len(e.block_hashes)} lists" if lookahead else None,
                            observed=e)
        for n, h in enumerate(e.block_hashes):
            found = index.get(h)
            if found is None:
                raise Violation(Family.CACHE, "BlockStored of a hash no request has",
                                observed=e)
            r, i = found
            end = (i + 1) * hash_block_size
            want = list(tokens[r][end - size:end])
            got = token_ids[n * size:(n + 1) * size]
            if got != want:
                raise Violation(Family.CACHE, f"BlockStored: chunk {n} of token_ids is not "
                                "the tokens its hash names", expected=want, observed=got)
            if ahead is not None:
                want = list(tokens[r][end:end + lookahead])
                if list(ahead[n]) != want:
                    raise Violation(Family.CACHE, f"BlockStored: lookahead_token_ids[{n}] "
                                    "is not the lookahead tokens its hash covers",
                                    expected=want, observed=list(ahead[n]))
