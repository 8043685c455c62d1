"""Content hashing for prefix-cache blocks.

A block's key is a 128-bit BLAKE2b digest (``person=`` domain tag) over a canonical,
uniquely decodable encoding of::

    is-first flag | previous block's hash (absent for a first block)
                  | the block's token ids | the extra key (absent when ``None``)

Every field is fixed-width or length-prefixed, so two different inputs never encode to
the same bytes; integers of any size or sign are encoded as minimal two's-complement
big-endian bytes behind a varint length. Nothing depends on Python's ``hash()`` or
``PYTHONHASHSEED``: the value is identical across processes, hosts and versions.

``make_extra_hash`` folds request-level keys (LoRA adapter id, cache salt, multimodal
input hashes) into one int for ``extra_hash`` under its own domain tag.
"""

from __future__ import annotations

import hashlib
import operator
import struct
from collections.abc import Callable, Sequence

from prefixcache.errors import InvalidArgumentError

__all__ = [
    "DIGEST_SIZE",
    "HashFunction",
    "default_hash_function",
    "hash_block_tokens",
    "make_extra_hash",
]

#: Signature of an injectable block hash:
#: ``(is_first_block, prev_block_hash, token_ids, extra_hash) -> int``.
#: ``prev_block_hash`` is ``None`` exactly when ``is_first_block`` is true.
HashFunction = Callable[[bool, int | None, Sequence[int], int | None], int]

DIGEST_SIZE = 16
_BLOCK_PERSON = b"prefixcache.blk1"
_EXTRA_PERSON = b"prefixcache.xtr1"

_TOKENS_FIXED = b"\x01"  # every token fits in a signed 64-bit integer
_TOKENS_VARIABLE = b"\x02"  # at least one token does not: each is length-prefixed
_ABSENT = b"\x00"
_PRESENT = b"\x01"
#: The keyed-and-tagged initial state, copied per block (cheaper than a new personalised one).
_BLOCK_STATE = hashlib.blake2b(digest_size=DIGEST_SIZE, person=_BLOCK_PERSON)


#: ``_varint(n)`` for n < 128 (one byte), precomputed for the hot path.
_SMALL_VARINTS = tuple(bytes((n,)) for n in range(128))


def _varint(n: int) -> bytes:
    """Unsigned LEB128 encoding of a non-negative length."""
    if n < 128:
        return _SMALL_VARINTS[n]
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _encode_int(value: object, what: str) -> bytes:
    """Length-prefixed minimal two's-complement encoding of an int of any size."""
    if value.__class__ is int:
        n: int = value
    else:
        try:
            n = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            raise InvalidArgumentError(
                f"{what} must be an int, got {type(value).__name__}"
            ) from None
    length = (n.bit_length() + 8) // 8
    return _varint(length) + n.to_bytes(length, "big", signed=True)


def _encode_bytes(data: bytes) -> bytes:
    return _varint(len(data)) + data


#: ``Struct("<{n}q")`` by token count below 128: little-endian signed 64-bit, as the encoding
#: fixes. Built at import, not on first use: a lazily filled cache would make the code paths
#: a hash takes depend on which hashes ran before (the fuzzers' arc coverage saw that).
_PACKERS = tuple(struct.Struct(f"<{n}q") for n in range(128))


#: Every digest of ours is below this: its ``_encode_int`` header is in ``_PREV_HEADS``.
_PREV_FAST_LIMIT = 1 << (8 * DIGEST_SIZE)
_PREV_HEADS = tuple(_PRESENT + _varint(n) for n in range(DIGEST_SIZE + 2))
#: ``_TOKENS_FIXED + _varint(count)`` for the counts a block of up to 127 tokens has.
_TOKEN_HEADS = tuple(_TOKENS_FIXED + _varint(n) for n in range(128))


def _encode_tokens(token_ids: Sequence[int]) -> bytes:
    try:
        count = len(token_ids)
    except TypeError:
        raise InvalidArgumentError("token_ids must be a sequence of ints") from None
    try:
        if count < len(_PACKERS):  # a block's worth: precomputed header and packer
            return _TOKEN_HEADS[count] + _PACKERS[count].pack(*token_ids)
        return _TOKENS_FIXED + _varint(count) + struct.pack(f"<{count}q", *token_ids)
    except struct.error:  # a token out of the signed 64-bit range, or not an int
        parts = [_encode_int(t, "token id") for t in token_ids]
        return _TOKENS_VARIABLE + _varint(count) + b"".join(parts)


def hash_block_tokens(
    is_first_block: bool,
    prev_block_hash: int | None,
    token_ids: Sequence[int],
    extra_hash: int | None = None,
) -> int:
    """Return the 128-bit content key of one block as a non-negative int.

    Contract: ``prev_block_hash`` is ``None`` if and only if ``is_first_block``;
    otherwise :class:`InvalidArgumentError`. Distinct arguments give distinct encodings,
    so equal results imply equal inputs up to a BLAKE2b collision.
    """
    if is_first_block is True:
        if prev_block_hash is not None:
            raise InvalidArgumentError("a first block has no previous block hash")
        head = _ABSENT
    elif is_first_block is False:
        if prev_block_hash is None:
            raise InvalidArgumentError("a non-first block needs its predecessor's hash")
        if prev_block_hash.__class__ is int and 0 <= prev_block_hash < _PREV_FAST_LIMIT:
            # A digest of ours (the common case): _encode_int inlined.
            size = (prev_block_hash.bit_length() + 8) >> 3
            head = _PREV_HEADS[size] + prev_block_hash.to_bytes(size, "big", signed=True)
        else:
            head = _PRESENT + _encode_int(prev_block_hash, "prev_block_hash")
    else:
        raise InvalidArgumentError("is_first_block must be a bool")
    tokens = _encode_tokens(token_ids)
    state = _BLOCK_STATE.copy()
    if extra_hash is None:
        state.update(head + tokens + _ABSENT)
    else:
        state.update(head + tokens + _PRESENT + _encode_int(extra_hash, "extra_hash"))
    return int.from_bytes(state.digest(), "big")


#: The hash every allocator uses unless another is injected.
default_hash_function: HashFunction = hash_block_tokens


def _encode_mm_item(item: object) -> bytes:
    if isinstance(item, str):  # the commonest kind first (no str is a bool or an int)
        return b"s" + _encode_bytes(item.encode("utf-8"))
    if isinstance(item, bool):
        raise InvalidArgumentError("multimodal hashes must be str, bytes or int")
    if isinstance(item, int):
        return b"i" + _encode_int(item, "multimodal hash")
    if isinstance(item, bytes | bytearray | memoryview):
        return b"b" + _encode_bytes(bytes(item))
    raise InvalidArgumentError(
        f"multimodal hashes must be str, bytes or int, got {type(item).__name__}"
    )


def make_extra_hash(
    *,
    lora_id: int | None = None,
    cache_salt: str | bytes | None = None,
    mm_hashes: Sequence[str | bytes | int] | None = (),
) -> int | None:
    """Fold request-level cache keys into one ``extra_hash`` value.

    Returns ``None`` when no key is given, so plain requests share cache entries with
    callers that pass no ``extra_hash`` at all. Otherwise returns a 128-bit int under a
    domain tag distinct from block hashes; every field is tagged and length-prefixed, so
    e.g. ``lora_id=1`` never equals ``cache_salt="1"`` and ``mm_hashes=("ab",)`` never
    equals ``mm_hashes=("a", "b")``. A ``str`` salt is its UTF-8 bytes. ``mm_hashes=None``
    is the empty sequence (no multimodal input).
    """
    if mm_hashes is None:
        mm_hashes = ()
    elif mm_hashes.__class__ is tuple or mm_hashes.__class__ is list:
        pass  # the common sequences, without the ABC check below
    elif isinstance(mm_hashes, str | bytes | bytearray | memoryview):
        raise InvalidArgumentError("mm_hashes must be a sequence of hashes, not one string")
    elif not isinstance(mm_hashes, Sequence):
        raise InvalidArgumentError(
            f"mm_hashes must be a sequence of hashes, got {type(mm_hashes).__name__}"
        )
    if lora_id is None and cache_salt is None and len(mm_hashes) == 0:
        return None
    # The encoding, fed to BLAKE2b in one update (the same digest as one update per part).
    parts: list[bytes] = []
    if lora_id is None:
        parts.append(_ABSENT)
    else:
        if isinstance(lora_id, bool):
            raise InvalidArgumentError("lora_id must be an int")
        parts.append(_PRESENT + _encode_int(lora_id, "lora_id"))
    if cache_salt is None:
        parts.append(_ABSENT)
    elif isinstance(cache_salt, str):
        parts.append(_PRESENT + _encode_bytes(cache_salt.encode("utf-8")))
    elif isinstance(cache_salt, bytes):
        parts.append(_PRESENT + _encode_bytes(cache_salt))
    else:
        raise InvalidArgumentError("cache_salt must be str or bytes")
    parts.append(_varint(len(mm_hashes)))
    parts += map(_encode_mm_item, mm_hashes)
    digest = hashlib.blake2b(b"".join(parts), digest_size=DIGEST_SIZE, person=_EXTRA_PERSON)
    return int.from_bytes(digest.digest(), "big")
