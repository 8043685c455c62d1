"""Broken content-hash surfaces: the block class's public ``hash_block_tokens`` disagrees with
the ``content_hash`` its blocks show, or lets bad arguments through. Only ``HashRecompute``
(and its malformed calls) reaches these. Each change is marked ``# BUG`` in the patched source.
"""

from __future__ import annotations

from tests.zoo.patching import Patch

_PUBLIC = "PrefixCachingBlock.hash_block_tokens"
_PUBLIC_RETURN = ("return default_hash_function(\n"
                  "    is_first_block, prev_block_hash, cur_block_token_ids, extra_hash\n"
                  ")")

#: The public ``hash_block_tokens`` leaves the predecessor's hash out, while blocks hash
#: correctly: an engine that hashes prompts itself (to look up cached prefixes) never finds a
#: non-first block.
PUBLIC_HASH_DROPS_PREFIX = (Patch(
    "prefix_caching_block", _PUBLIC, _PUBLIC_RETURN,
    "default_hash_function(is_first_block, prev_block_hash, cur_block_token_ids, extra_hash)\n"
    "return default_hash_function(True, None, cur_block_token_ids, extra_hash)  # BUG"),)

#: ``content_hash`` hashes every block as if it were first (the predecessor's hash is not
#: chained in), while the public ``hash_block_tokens`` is right.
UNCHAINED_CONTENT_HASH = (Patch(
    "prefix_caching_block", "PrefixCachingBlock._compute_content_hash",
    "node._prev_block is None, prev_hash, node._token_ids, node._extra_hash",
    "True, None, node._token_ids, node._extra_hash  # BUG: unchained"),)

#: The public ``hash_block_tokens`` checks no argument: a truthy ``is_first_block`` counts as
#: first and drops whatever predecessor hash it was given.
LAX_HASH_ARGUMENTS = (Patch(
    "prefix_caching_block", _PUBLIC, _PUBLIC_RETURN,
    "if is_first_block:  # BUG: truthiness, and a first block's predecessor hash ignored\n"
    "    return default_hash_function(True, None, cur_block_token_ids, extra_hash)\n"
    "return default_hash_function(False, prev_block_hash, cur_block_token_ids, extra_hash)"),)

#: The block key is over the tokens' text: ``repr`` of each token id, so an ``int`` subclass
#: whose ``repr`` differs (numpy's ``np.int64(5)``) keys apart from the plain int (blocks,
#: which store plain ints, and the public ``hash_block_tokens`` agree). Arguments are checked
#: as the bundled hash checks them.
TEXT_KEY = (Patch(
    "hashing", "", "default_hash_function: HashFunction = hash_block_tokens",
    "def default_hash_function(is_first_block, prev_block_hash, token_ids, extra_hash=None):\n"
    "    hash_block_tokens(is_first_block, prev_block_hash, token_ids, extra_hash)\n"
    '    text = "|".join((repr(is_first_block), repr(prev_block_hash),\n'
    '                     ",".join(map(repr, token_ids)), repr(extra_hash)))  # BUG: repr\n'
    '    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=16).digest(), "big")'),)
