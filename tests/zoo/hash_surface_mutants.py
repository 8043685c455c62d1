"""Broken content-hash surfaces: the block class's public ``hash_block_tokens`` disagrees with
the ``content_hash`` its blocks show, or lets bad arguments through. Only ``HashRecompute``
(and its malformed calls) reaches these. Every ``# BUG`` line is the one change from the bundled
code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from prefixcache.hashing import default_hash_function
from prefixcache.prefix_caching_block import PrefixCachingBlock
from tests.zoo.plumbing import PluggableAllocator


class PublicHashDropsPrefixBlock(PrefixCachingBlock):
    """The public ``hash_block_tokens`` leaves the predecessor's hash out, while blocks hash
    correctly: an engine that hashes prompts itself (to look up cached prefixes) never finds
    a non-first block."""

    __slots__ = ()

    @classmethod
    def hash_block_tokens(
        cls,
        is_first_block: bool,
        prev_block_hash: int | None,
        cur_block_token_ids: Sequence[int],
        extra_hash: int | None = None,
    ) -> int:
        super().hash_block_tokens(is_first_block, prev_block_hash, cur_block_token_ids,
                                  extra_hash)  # the bundled argument checks
        return super().hash_block_tokens(True, None, cur_block_token_ids, extra_hash)  # BUG


class PublicHashDropsPrefixAllocator(PluggableAllocator):
    block_class = PublicHashDropsPrefixBlock


class UnchainedContentHashBlock(PrefixCachingBlock):
    """``content_hash`` hashes every block as if it were first (the predecessor's hash is not
    chained in), while the public ``hash_block_tokens`` is right."""

    __slots__ = ()

    def _compute_content_hash(self) -> int | None:
        prev = self._prev_block
        if prev is not None and prev.content_hash is None:
            return None
        value = self._hash_fn(True, None, self._token_ids, self._extra_hash)  # BUG: unchained
        self._cached_content_hash = value
        return value


class UnchainedContentHashAllocator(PluggableAllocator):
    block_class = UnchainedContentHashBlock


class LaxHashArgumentsBlock(PrefixCachingBlock):
    """The public ``hash_block_tokens`` checks no argument: a truthy ``is_first_block``
    counts as first and drops whatever predecessor hash it was given."""

    __slots__ = ()

    @classmethod
    def hash_block_tokens(
        cls,
        is_first_block: bool,
        prev_block_hash: int | None,
        cur_block_token_ids: Sequence[int],
        extra_hash: int | None = None,
    ) -> int:
        if is_first_block:  # BUG: truthiness, and a first block's predecessor hash ignored
            return super().hash_block_tokens(True, None, cur_block_token_ids, extra_hash)
        return super().hash_block_tokens(False, prev_block_hash, cur_block_token_ids,
                                         extra_hash)


class LaxHashArgumentsAllocator(PluggableAllocator):
    block_class = LaxHashArgumentsBlock


def text_key_hash(
    is_first_block: bool,
    prev_block_hash: int | None,
    token_ids: Sequence[int],
    extra_hash: int | None = None,
) -> int:
    """A key over the tokens' text: ``repr`` of each token id, so an ``int`` subclass whose
    ``repr`` differs (numpy's ``np.int64(5)``) keys apart from the plain int. Arguments are
    checked as the bundled hash checks them."""
    default_hash_function(is_first_block, prev_block_hash, token_ids, extra_hash)
    text = "|".join((repr(is_first_block), repr(prev_block_hash),
                     ",".join(map(repr, token_ids)), repr(extra_hash)))  # BUG: repr, not int
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=16).digest(), "big")


class TextKeyBlock(PrefixCachingBlock):
    """The public ``hash_block_tokens`` is :func:`text_key_hash` (as the allocator's blocks,
    which always store plain ints): int-subclass token ids hash apart from their ints."""

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
        return text_key_hash(is_first_block, prev_block_hash, cur_block_token_ids, extra_hash)


class TextKeyAllocator(PluggableAllocator):
    block_class = TextKeyBlock
