"""Broken request-key builders (claimed as the target's ``extra_key_function``): the bundled
``make_extra_hash`` with one change, marked ``# BUG``. Only requests under ``ExtraKey`` values
(bytes salts and multimodal hashes, their respellings and near misses) and malformed key
builder arguments reach these.
"""

from __future__ import annotations

from collections.abc import Sequence

from prefixcache.hashing import make_extra_hash


def extra_hash_bool_lora_is_int(
    *,
    lora_id: int | None = None,
    cache_salt: str | bytes | None = None,
    mm_hashes: Sequence[str | bytes | int] = (),
) -> int | None:
    """A bool LoRA id is taken as the int it subclasses: ``True`` is silently adapter 1."""
    if isinstance(lora_id, bool):
        lora_id = int(lora_id)  # BUG: should be refused
    return make_extra_hash(lora_id=lora_id, cache_salt=cache_salt, mm_hashes=mm_hashes)


def extra_hash_bytes_salt_ignored(
    *,
    lora_id: int | None = None,
    cache_salt: str | bytes | None = None,
    mm_hashes: Sequence[str | bytes | int] = (),
) -> int | None:
    """Only ``str`` salts are folded in: a bytes salt is silently dropped, so a request salted
    with bytes shares blocks with unsalted ones (and no longer with the same salt as text)."""
    if isinstance(cache_salt, bytes):
        cache_salt = None  # BUG: the salt is lost
    return make_extra_hash(lora_id=lora_id, cache_salt=cache_salt, mm_hashes=mm_hashes)


def extra_hash_bytes_salt_apart(
    *,
    lora_id: int | None = None,
    cache_salt: str | bytes | None = None,
    mm_hashes: Sequence[str | bytes | int] = (),
) -> int | None:
    """A bytes salt is folded in as its ``repr`` text, so it never matches the ``str`` salt it
    spells (``b"a"`` and ``"a"`` are one salt): equal keys stop sharing."""
    if isinstance(cache_salt, bytes):
        cache_salt = repr(cache_salt)  # BUG: should be the bytes themselves
    return make_extra_hash(lora_id=lora_id, cache_salt=cache_salt, mm_hashes=mm_hashes)
