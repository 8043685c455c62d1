"""Weak block keys that no state machine example reaches: the key is consistent everywhere
(``content_hash``, ``hash_block_tokens``, the content map), only too short, so two different
contents collide once a few hundred blocks exist, far beyond the few dozen one example makes.
Only the direct hash-quality check (``properties.families.v0.hash_quality``) sees it."""

from __future__ import annotations

from tests.zoo.patching import Patch

#: The 128-bit BLAKE2b key truncated to its low 16 bits (the one hash function every key of
#: the allocator comes from).
KEY_TRUNCATED_16_BITS = (Patch(
    "hashing", "hash_block_tokens",
    'return int.from_bytes(state.digest(), "big")',
    'return int.from_bytes(state.digest(), "big") & 0xFFFF  # BUG: was the whole digest'),)
