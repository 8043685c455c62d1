"""A deliberately weak block hash, injected into the bundled allocator by the hashing
harness's weak mode to show that hash collisions are caught by the content checks of the
model and shadow memory, not missed by luck.

It is CPython's ``hash`` of the tuple, the bug class of allocators that key the cache on
``hash(tuple(tokens))``: ``-1`` and ``-2`` collide, integers congruent modulo ``2**61 - 1``
collide, and an absent extra key or predecessor collides with ``0``. It is deterministic
(integer hashing is not salted).
"""

from __future__ import annotations

from collections.abc import Sequence

_MASK = (1 << 63) - 1


def weak_hash(is_first_block: bool, prev_block_hash: int | None, token_ids: Sequence[int],
              extra_hash: int | None) -> int:
    """Same signature as ``prefixcache.hashing.HashFunction``; non-negative."""
    prev = 0 if prev_block_hash is None else prev_block_hash
    extra = 0 if extra_hash is None else extra_hash
    return hash((prev, tuple(token_ids), extra)) & _MASK
