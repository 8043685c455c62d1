"""Broken content keys: patches of ``prefixcache/hashing.py`` (the block hash every allocator
uses unless another is injected, and the engine's extra-key builder) and of the block class's
hashing-related properties. Each change is marked ``# BUG`` in the patched source.
"""

from __future__ import annotations

from tests.zoo.patching import Patch

#: The extra key (LoRA adapter, cache salt, multimodal hashes) is left out of the block hash.
HASH_IGNORING_EXTRA = (Patch("hashing", "hash_block_tokens", "if extra_hash is None:",
                             "if True:  # BUG: the extra key is left out"),)

#: The engine's extra-key function leaves out the cache salt: requests that salt their
#: prompts apart share blocks anyway (and a malformed salt is never looked at).
EXTRA_HASH_IGNORING_SALT = (Patch("hashing", "make_extra_hash", "if mm_hashes is None:",
                                  "cache_salt = None  # BUG: the cache salt is dropped\n"
                                  "if mm_hashes is None:"),)

#: Upstream Aphrodite's key: Python ``hash()`` of the tuple (``hash(-1) == hash(-2)``), after
#: the bundled argument checks. ``None`` enters as a fixed stand-in: before Python 3.12
#: ``hash(None)`` is the object's address, which would collide differently in every process.
PYTHON_TUPLE_HASH = (Patch(
    "hashing", "", "default_hash_function: HashFunction = hash_block_tokens",
    "def default_hash_function(is_first_block, prev_block_hash, token_ids, extra_hash=None):\n"
    "    hash_block_tokens(is_first_block, prev_block_hash, token_ids, extra_hash)\n"
    "    prev = 0x5EED if prev_block_hash is None else prev_block_hash\n"
    "    extra = 0x5EED if extra_hash is None else extra_hash\n"
    "    return hash((is_first_block, prev, *token_ids, extra))  # BUG"),)

#: The previous block's hash is not chained in: equal blocks after different prefixes share
#: a key.
HASH_DROPPING_PREFIX = (Patch("hashing", "hash_block_tokens",
                              "tokens = _encode_tokens(token_ids)",
                              "head, tokens = _ABSENT, _encode_tokens(token_ids)  # BUG"),)

#: ``is_full`` off by one in the hash: a block is hashed (and promoted) one token early.
EARLY_HASH = (Patch("prefix_caching_block", "PrefixCachingBlock._current_hash",
                    "if len(self._token_ids) != self._block_size:",
                    "if self._block_size - len(self._token_ids) > 1:  # BUG: was `not full`"),)

#: ``num_tokens_total`` counts only this block's tokens, not the prefix's, so the evictor sees
#: every block as equally deep.
LOCAL_TOKEN_COUNT = (Patch("prefix_caching_block", "PrefixCachingBlock.num_tokens_total",
                           "return self._cached_num_tokens_total",
                           "return len(self._token_ids)  # BUG: was the total over the chain"),)
