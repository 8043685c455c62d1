"""Collision-resistant block hash functions for the v1 hasher (``hash_fn(obj) -> bytes``).

Upstream's ``vllm.utils.hashing.sha256`` digests a pickle of the object. Here the object is
first encoded canonically and injectively: every value carries a type tag and every
variable-length field a length prefix, so two different objects (``1`` vs ``True`` vs ``1.0``,
``("a", "bc")`` vs ``("ab", "c")``, a tuple vs a list) never encode to the same bytes. The digest
is SHA-256 (256 bits), the same width as upstream's. Values are identical across processes and
versions: nothing depends on ``hash()`` or pickle protocol details.

Supported values: ``None``, ``bool``, ``int`` (any size), ``float``, ``str``, ``bytes``,
``tuple`` and ``list`` of those. Anything else raises ``InvalidArgumentError``.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from typing import Any

from prefixcache.errors import InvalidArgumentError
from prefixcache.hashing import _varint  # the v0 key's length prefix: one LEB128 encoder

__all__ = ["canonical_bytes", "get_hash_fn_by_name", "sha256", "sha256_cbor"]

_INT64 = (-(1 << 63), (1 << 63) - 1)


def _encode(value: Any, out: bytearray) -> None:
    kind = type(value)
    if kind is int:
        width = (value.bit_length() + 8) // 8  # room for the sign bit
        out += b"I" + _varint(width) + value.to_bytes(width, "big", signed=True)
    elif kind is tuple or kind is list:
        out += (b"U" if kind is tuple else b"L") + _varint(len(value))
        if (
            value
            and set(map(type, value)) == {int}
            and _INT64[0] <= min(value)
            and max(value) <= _INT64[1]
        ):
            # Fast path for token ids: fixed-width signed 64-bit, under its own tag.
            out += b"q" + struct.pack(f">{len(value)}q", *value)
        else:
            out += b"g"
            for item in value:
                _encode(item, out)
    elif kind is bytes:
        out += b"B" + _varint(len(value)) + value
    elif kind is str:
        data = value.encode("utf-8", "surrogatepass")
        out += b"S" + _varint(len(data)) + data
    elif value is None:
        out += b"N"
    elif kind is bool:
        out += b"T" if value else b"F"
    elif kind is float:
        out += b"D" + struct.pack(">d", value)
    else:
        raise InvalidArgumentError(
            f"cannot hash a {kind.__name__}: only None, bool, int, float, str, bytes, "
            "tuple and list are supported"
        )


def canonical_bytes(value: Any) -> bytes:
    """The injective encoding of ``value`` that ``sha256`` digests."""
    out = bytearray()
    _encode(value, out)
    return bytes(out)


def sha256(input: Any) -> bytes:
    """SHA-256 of the canonical encoding of ``input`` (32 bytes)."""
    return hashlib.sha256(canonical_bytes(input)).digest()


#: Upstream offers a CBOR-encoded variant for non-Python consumers; the canonical encoding
#: here is already language-neutral, so the name maps to the same function.
sha256_cbor = sha256


def get_hash_fn_by_name(hash_fn_name: str) -> Callable[[Any], bytes]:
    """The hash function for a ``--prefix-caching-hash-algo`` name.

    ``"sha256"`` and ``"sha256_cbor"`` are supported; the non-cryptographic ``xxhash`` variants
    are refused (``InvalidArgumentError``, a ``ValueError``) because their keys are not collision
    resistant.
    """
    if hash_fn_name in ("sha256", "sha256_cbor"):
        return sha256
    raise InvalidArgumentError(f"Unsupported hash function: {hash_fn_name}")
