"""Weak block keys that no state machine example reaches: the key is consistent everywhere
(``content_hash``, ``hash_block_tokens``, the content map), only too short, so two different
contents collide once a few hundred blocks exist, far beyond the few dozen one example makes.
Only the direct hash-quality check (``properties.hash_quality``) sees it. Every ``# BUG``
line is the one change from the bundled code.
"""

from __future__ import annotations

from collections.abc import Sequence

from prefixcache.hashing import default_hash_function
from prefixcache.prefix_caching_block import PrefixCachingBlock
from tests.zoo.plumbing import PluggableAllocator

KEY_BITS = 16


def truncated_hash(
    is_first_block: bool,
    prev_block_hash: int | None,
    token_ids: Sequence[int],
    extra_hash: int | None = None,
) -> int:
    """The default 128-bit digest truncated to its low 16 bits."""
    digest = default_hash_function(is_first_block, prev_block_hash, token_ids, extra_hash)
    return digest & ((1 << KEY_BITS) - 1)  # BUG: was the whole digest


class TruncatedKeyBlock(PrefixCachingBlock):
    """Its public ``hash_block_tokens`` is the truncated key too, so recomputing a block's
    hash agrees with its ``content_hash``."""

    __slots__ = ()

    @classmethod
    def hash_block_tokens(
        cls,
        is_first_block: bool,
        prev_block_hash: int | None,
        cur_block_token_ids: Sequence[int],
        extra_hash: int | None = None,
    ) -> int:
        if prev_block_hash is not None and prev_block_hash == cls._none_hash:
            prev_block_hash = None
        return truncated_hash(is_first_block, prev_block_hash, cur_block_token_ids, extra_hash)


class TruncatedKeyAllocator(PluggableAllocator):
    block_class = TruncatedKeyBlock
