"""An injected hash function (``InjectedHash``, ``models.families.v0.ops.hashing``; an extension).

docs/API.md keys a prefix-caching block by ``hash_block_tokens`` (3.3). A target whose device-aware
factory also takes ``hash_function`` (``CpuGpuBlockAllocator.create(..., hash_function=f)``)
promises that ``f`` replaces that key for every block of **both** devices' allocators: a full
block's ``content_hash`` is ``f(is_first_block, prev_block_hash, token_ids, extra_hash)``, with
``prev_block_hash`` its predecessor's ``content_hash`` (``None`` for a first block), whether the
block was allocated immutable, alone or in a chain, or filled by appends; and blocks whose keys
``f`` makes equal share one id (a cache hit, docs/API.md §4.1 and §4.4), as equal contents do
under the default hash (HASH for the values, CACHE for the ids).

:func:`injected_hash` is the function the suite injects: deterministic in every process (no
``hash()`` of ``None`` or strings) and blind to token order within a block, so a permutation of
a block's tokens collides with it, which the default hash never makes equal.
"""

from __future__ import annotations

from collections.abc import Sequence

_MASK = (1 << 64) - 1
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


def injected_hash(is_first_block: bool, prev_block_hash: int | None,
                  cur_block_token_ids: Sequence[int], extra_hash: int | None = None) -> int:
    """FNV-1a over the first flag, the predecessor's hash, the block's tokens **sorted** and
    the extra hash (``hash_block_tokens``' arguments): a non-negative int below ``2**64``."""
    words = (int(bool(is_first_block)), -1 if prev_block_hash is None else prev_block_hash,
             *sorted(int(t) for t in cur_block_token_ids), -1 if extra_hash is None else extra_hash)
    h = _FNV_OFFSET
    for word in words:
        h = ((h ^ (word & _MASK)) * _FNV_PRIME) & _MASK
    return h
