"""Broken content keys: hash functions (injected as the allocator's ``hash_function``) and
block classes whose hashing-related property is off. Every ``# BUG`` line is the one change
from the bundled code.
"""

from __future__ import annotations

from collections.abc import Sequence

from prefixcache.hashing import hash_block_tokens, make_extra_hash
from prefixcache.prefix_caching_block import PrefixCachingBlock
from tests.zoo.plumbing import PluggableAllocator


def hash_ignoring_extra(
    is_first_block: bool,
    prev_block_hash: int | None,
    token_ids: Sequence[int],
    extra_hash: int | None = None,
) -> int:
    """The extra key (LoRA adapter, cache salt, multimodal hashes) is left out."""
    return hash_block_tokens(is_first_block, prev_block_hash, token_ids, None)  # BUG


def extra_hash_ignoring_salt(
    *,
    lora_id: int | None = None,
    cache_salt: str | bytes | None = None,
    mm_hashes: Sequence[str | bytes | int] = (),
) -> int | None:
    """The engine's extra-key function (claimed as the target's ``extra_key_function``)
    leaves out the cache salt: requests that salt their prompts apart share blocks anyway."""
    return make_extra_hash(lora_id=lora_id, mm_hashes=mm_hashes)  # BUG: cache_salt dropped


def python_tuple_hash(
    is_first_block: bool,
    prev_block_hash: int | None,
    token_ids: Sequence[int],
    extra_hash: int | None = None,
) -> int:
    """Upstream Aphrodite's key: Python ``hash()`` of the tuple (``hash(-1) == hash(-2)``).
    ``None`` enters as a fixed stand-in: before Python 3.12 ``hash(None)`` is the object's
    address, which would make the mutant collide differently in every process."""
    prev = _NONE if prev_block_hash is None else prev_block_hash
    extra = _NONE if extra_hash is None else extra_hash
    return hash((is_first_block, prev, *token_ids, extra))  # BUG


#: Stands in for ``None`` in :func:`python_tuple_hash` (any fixed int; not a hash of anything).
_NONE = 0x5EED


def hash_dropping_prefix(
    is_first_block: bool,
    prev_block_hash: int | None,
    token_ids: Sequence[int],
    extra_hash: int | None = None,
) -> int:
    """The previous block's hash is not chained in: equal blocks after different prefixes
    share a key."""
    return hash_block_tokens(True, None, token_ids, extra_hash)  # BUG


class EarlyHashBlock(PrefixCachingBlock):
    """``is_full`` off by one in the hash: a block is hashed (and promoted) one token early."""

    __slots__ = ()

    def _current_hash(self) -> int | None:
        cached = self._cached_content_hash
        if cached is not None:
            return cached
        if self.num_empty_slots > 1:  # BUG: was `not self.is_full`
            return None
        return self._compute_content_hash()


class EarlyHashAllocator(PluggableAllocator):
    block_class = EarlyHashBlock


class LocalTokenCountBlock(PrefixCachingBlock):
    """``num_tokens_total`` counts only this block's tokens, not the prefix's, so the evictor
    sees every block as equally deep."""

    __slots__ = ()

    @property
    def num_tokens_total(self) -> int:
        return len(self.token_ids)  # BUG: was the running total over the chain


class LocalTokenCountAllocator(PluggableAllocator):
    block_class = LocalTokenCountBlock
