"""``ToyCache``: a prefix cache of fixed-size blocks, small enough to read in one sitting.

A request's tokens are cut into blocks of ``block_size`` tokens; block ``i`` is keyed by the
request's tokens up to its end (its whole prefix), so equal keys mean equal KV. ``allocate``
reuses the blocks of the longest cached run of full blocks at the start of the tokens, and takes
fresh blocks for the rest: never-used blocks first, then the least recently freed cached block
(its key is dropped, the block is overwritten). A full fresh block is cached under its key.
``free`` drops one holder of each block; a block nobody holds stays cached until it is evicted.

Contract: ``allocate`` either returns one id per block, or raises :class:`ToyOutOfBlocks` and
changes nothing; ``free`` of ids the caller does not hold raises :class:`ToyMisuse` and changes
nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

Key = tuple[int, ...]


class ToyError(Exception):
    """Base of the toy cache's errors."""


class ToyOutOfBlocks(ToyError):
    """Not enough free or evictable blocks for an allocation."""


class ToyMisuse(ToyError):
    """An argument the contract refuses (an id not held, a bad count)."""


class ToyCache:
    """See the module docstring."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ToyMisuse(f"num_blocks and block_size must be positive, got "
                            f"{num_blocks}, {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._fresh: list[int] = list(range(num_blocks - 1, -1, -1))  # never used; pop() = 0
        self._evictable: OrderedDict[int, None] = OrderedDict()  # cached, unheld; LRU first
        self._refs: dict[int, int] = {}
        self._cached: dict[Key, int] = {}
        self._key_of: dict[int, Key] = {}

    # ------------------------------------------------------------------ the API

    def lookup(self, tokens: Sequence[int]) -> int:
        """How many leading tokens are cached (a multiple of the block size)."""
        return len(self._hits(tuple(tokens))) * self.block_size

    def allocate(self, tokens: Sequence[int]) -> list[int]:
        """One block id per block of ``tokens``: the cached prefix's, then fresh ones."""
        key = tuple(tokens)
        hits = self._hits(key)
        blocks = -(-len(key) // self.block_size)
        need = blocks - len(hits)
        reusable = [b for b in hits if self._refs.get(b, 0) == 0]
        if need > len(self._fresh) + len(self._evictable) - len(reusable):
            raise ToyOutOfBlocks(f"{need} fresh block(s) needed, "
                                 f"{len(self._fresh) + len(self._evictable) - len(reusable)} "
                                 "free")
        for block in hits:
            self._hold(block)
        ids = list(hits)
        for i in range(len(hits), blocks):
            block = self._take()
            self._refs[block] = 1
            end = min((i + 1) * self.block_size, len(key))
            if end - i * self.block_size == self.block_size:
                self._cache(key[:end], block)
            ids.append(block)
        return ids

    def free(self, ids: Sequence[int]) -> None:
        """Drop one holder of each id (a request's blocks, once)."""
        counts: dict[int, int] = {}
        for block in ids:
            counts[block] = counts.get(block, 0) + 1
        bad = sorted(b for b, n in counts.items() if self._refs.get(b, 0) < n)
        if bad:
            raise ToyMisuse(f"freeing blocks not held that often: {bad}")
        for block in reversed(ids):
            self._release(block)

    def num_free(self) -> int:
        """Blocks an allocation may take: never used or cached and unheld."""
        return len(self._fresh) + len(self._evictable)

    # ------------------------------------------------------------------ introspection

    def ref_count(self, block: int) -> int:
        return self._refs.get(block, 0)

    def cached_blocks(self) -> dict[Key, int]:
        """Every cached key and the block holding it."""
        return dict(self._cached)

    # ------------------------------------------------------------------ internals

    def _hits(self, key: Key) -> list[int]:
        hits: list[int] = []
        for end in range(self.block_size, len(key) + 1, self.block_size):
            block = self._cached.get(key[:end])
            if block is None:
                break
            hits.append(block)
        return hits

    def _hold(self, block: int) -> None:
        self._evictable.pop(block, None)
        self._refs[block] = self._refs.get(block, 0) + 1

    def _release(self, block: int) -> None:
        left = self._refs[block] - 1
        if left:
            self._refs[block] = left
            return
        del self._refs[block]
        if block in self._key_of:
            self._evictable[block] = None
        else:
            self._fresh.append(block)

    def _take(self) -> int:
        if self._fresh:
            return self._fresh.pop()
        block, _ = self._evictable.popitem(last=False)
        del self._cached[self._key_of.pop(block)]
        return block

    def _cache(self, key: Key, block: int) -> None:
        if key not in self._cached:
            self._cached[key] = block
            self._key_of[block] = key
