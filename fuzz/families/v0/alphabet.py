"""Token ids and extra keys the decoder draws from.

The *plain* alphabet is tiny (0..3) so equal blocks, and with them cache hits, prefix sharing
and promotions onto cached ids, are common; a few byte values select extreme ids. The
*adversarial* alphabet is built for hash collisions: -1 and -2 (CPython hashes both to -2),
values congruent modulo 2**61 - 1 (CPython's integer hash modulus), the int64 edges and
values beyond them, and extra keys that equal token ids or ``None``-like sentinels.
"""

from __future__ import annotations

from fuzz.core.bytesource import ByteSource
from models.families.v0.operations import ExtraKey

MERSENNE_61 = 2**61 - 1

#: Extreme ids reachable from the plain alphabet (one byte value in eight).
WILD_TOKENS: tuple[int, ...] = (-1, -2, MERSENNE_61, 2**61, 2**63 - 1, 50_000, 1, 0)

#: Ids that collide under weak hashes: equal CPython hashes, equal low bits, int64 edges.
ADVERSARIAL_TOKENS: tuple[int, ...] = (
    0, 1, 2, -1, -2,
    MERSENNE_61, MERSENNE_61 + 1, MERSENNE_61 + 2, 2 * MERSENNE_61, 2 * MERSENNE_61 + 1,
    -MERSENNE_61, -MERSENNE_61 - 1, 2**61, 2**62, 2**63 - 1, -(2**63), 2**63, 2**64,
    2**64 + 1, -(2**64), 2**32, 2**32 + 1, 2**31 - 1, -(2**31), 10**30, -(10**30),
    7, 8, 255, 256, 65_535, 65_536,
)

#: Extra keys (LoRA id, cache salt, multimodal hash folded to an int).
PLAIN_EXTRAS: tuple[int | None, ...] = (None, None, 0, 1, 7, -1)
ADVERSARIAL_EXTRAS: tuple[int | None, ...] = (
    None, 0, 1, -1, -2, MERSENNE_61, MERSENNE_61 + 1, 2**61, 2**63 - 1, -(2**63), 2**64, 2,
)

#: Request keys (rendered by the target's extra-key function), each kept only if the target
#: folds in all its fields. Plain: pairs one field apart, so equal prompts under different
#: keys are common. Adversarial: keys whose fields look alike (the salt "5" against the
#: multimodal hash 5 or "5", an int past int64, an empty-looking salt).
PLAIN_EXTRA_KEYS: tuple[ExtraKey, ...] = (
    ExtraKey(lora_id=1), ExtraKey(lora_id=2), ExtraKey(cache_salt="a"), ExtraKey(cache_salt="b"),
    ExtraKey(lora_id=1, cache_salt="a"), ExtraKey(mm_hashes=(5,)), ExtraKey(mm_hashes=("5",)),
    # bytes (capability "bytes"): the salt "a" respelled (the same key), a bytes hash
    ExtraKey(cache_salt=b"a"), ExtraKey(mm_hashes=(b"5",)),
)
ADVERSARIAL_EXTRA_KEYS: tuple[ExtraKey, ...] = (
    ExtraKey(cache_salt="5"), ExtraKey(mm_hashes=(5,)), ExtraKey(mm_hashes=("5",)),
    ExtraKey(cache_salt=""), ExtraKey(mm_hashes=(2**64,)), ExtraKey(lora_id=1),
    ExtraKey(lora_id=1, mm_hashes=(1,)),
    ExtraKey(cache_salt=b"5"), ExtraKey(cache_salt=b"\xff"), ExtraKey(mm_hashes=(b"5",)),
)


def plain_token(src: ByteSource) -> int:
    """One byte: mostly 0..3, one value in eight an extreme id."""
    b = src.byte()
    if b < 224:
        return b & 3
    return WILD_TOKENS[b & 7]


def adversarial_token(src: ByteSource) -> int:
    """One byte: half the values 0..3, the rest the collision-prone ids."""
    b = src.byte()
    if b < 128:
        return b & 3
    return ADVERSARIAL_TOKENS[b % len(ADVERSARIAL_TOKENS)]
