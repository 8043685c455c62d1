"""Argument checks shared by the allocators (explicit raises; safe under ``python -O``)."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence, Set
from typing import Any

from prefixcache.errors import BlockFullError, InvalidArgumentError, UnknownBlockIdError
from prefixcache.interfaces import Block

__all__ = [
    "check_block",
    "check_block_id",
    "check_block_size",
    "check_count",
    "check_device_none",
    "check_extra_hash",
    "check_positive",
    "check_time",
    "checked_block_ids",
    "checked_block_tokens",
    "checked_blocks",
    "checked_list",
    "checked_tokens",
]


def check_count(value: object, what: str) -> int:
    """A non-negative int (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"{what} must be a non-negative int, got {value!r}")
    return value


def check_positive(value: object, what: str) -> int:
    """A positive int (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgumentError(f"{what} must be a positive int, got {value!r}")
    return value


def check_block_size(value: object) -> int:
    """A positive int (bools rejected)."""
    return check_positive(value, "block_size")


_JUST_INT = frozenset((int,))


def checked_tokens(token_ids: object) -> list[int]:
    """A fresh list of the token ids, each an int (``operator.index``-convertible) and
    not a bool: ``True`` would otherwise alias token 1."""
    if (token_ids.__class__ is list or token_ids.__class__ is tuple) and _JUST_INT.issuperset(
        map(type, token_ids)
    ):  # the fast path (C loops): a list or tuple of plain ints
        return list(token_ids)
    if isinstance(token_ids, str | bytes | Mapping | Set) or not isinstance(token_ids, Iterable):
        raise InvalidArgumentError(
            f"token_ids must be a sequence of ints, got {type(token_ids).__name__}"
        )
    tokens: list[int] = []
    append = tokens.append
    try:
        for token in token_ids:
            if token.__class__ is bool:
                raise InvalidArgumentError("token_ids must contain ints, not bools")
            append(operator.index(token))
    except TypeError:
        raise InvalidArgumentError("token_ids must contain only ints") from None
    return tokens


def checked_block_tokens(token_ids: object, block_size: int) -> list[int]:
    """A fresh list of the token ids (see :func:`checked_tokens`) for a block of
    ``block_size`` (a positive int): more tokens than that is a :class:`BlockFullError`."""
    if block_size.__class__ is not int or block_size <= 0:
        check_block_size(block_size)
    tokens = checked_tokens(token_ids)
    if len(tokens) > block_size:
        raise BlockFullError(f"{len(tokens)} tokens do not fit a block of size {block_size}")
    return tokens


def checked_list(value: object, what: str) -> list[Any]:
    """``value`` itself if it is a list (so a caller may extend and return the caller's
    own list), else a list copy of any other non-string sequence; anything else
    (``None``, a number, a block, a mapping) is an :class:`InvalidArgumentError`."""
    if isinstance(value, list):
        return value
    if isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray):
        return list(value)
    raise InvalidArgumentError(f"{what} must be a list, got {type(value).__name__}")


def check_block(value: object, what: str = "block") -> Block:
    """``value`` if it is a :class:`Block` (spec'd mocks of a block class pass)."""
    if not isinstance(value, Block):
        raise InvalidArgumentError(f"{what} must be a Block, got {type(value).__name__}")
    return value


def checked_blocks(value: object, what: str = "blocks") -> list[Block]:
    """A list of :class:`Block` objects (see :func:`checked_list`); a single block where a
    list is expected is rejected too."""
    blocks = checked_list(value, what)
    for block in blocks:
        if not isinstance(block, Block):
            raise InvalidArgumentError(
                f"{what} must contain only Blocks, got {type(block).__name__}"
            )
    return blocks


def check_block_id(block_id: object) -> int:
    """``block_id`` if it is an int; anything else (a bool or float that would alias an
    int id in a dict lookup, an unhashable value) is an :class:`UnknownBlockIdError`."""
    if block_id.__class__ is bool or not isinstance(block_id, int):
        raise UnknownBlockIdError(f"block id {block_id!r} is not an int")
    return block_id


MAX_BLOCK_ID = 1 << 64


def checked_block_ids(block_ids: Iterable[int], expected: int) -> list[int]:
    """``expected`` distinct ids in ``[0, 2**64)``, in the given order."""
    if isinstance(block_ids, str | bytes) or not isinstance(block_ids, Iterable):
        raise InvalidArgumentError("block_ids must be an iterable of ints")
    ids = list(block_ids)
    for block_id in ids:
        if (
            isinstance(block_id, bool)
            or not isinstance(block_id, int)
            or not (0 <= block_id < MAX_BLOCK_ID)
        ):
            raise InvalidArgumentError(f"block ids must be ints in [0, 2**64), got {block_id!r}")
    if len(ids) != expected:
        raise InvalidArgumentError(f"expected {expected} block ids, got {len(ids)}")
    if len(set(ids)) != len(ids):
        raise InvalidArgumentError("block ids must be unique")
    return ids


def check_extra_hash(extra_hash: object) -> None:
    """``None`` or an int (bools rejected)."""
    if extra_hash is not None and (isinstance(extra_hash, bool) or not isinstance(extra_hash, int)):
        raise InvalidArgumentError(f"extra_hash must be an int or None, got {extra_hash!r}")


def check_device_none(device: object) -> None:
    """Single-device allocators take no device argument."""
    if device is not None:
        raise InvalidArgumentError(
            f"this allocator manages one device; device must be None, got {device!r}"
        )


def check_time(now: object) -> float:
    """A real, non-NaN time stamp that a float represents exactly (ints up to 2**53)."""
    if isinstance(now, bool) or not isinstance(now, int | float) or math.isnan(now):
        raise InvalidArgumentError(f"a time stamp must be a real number, got {now!r}")
    if isinstance(now, int) and float(now) != now:
        raise InvalidArgumentError(f"time stamp {now!r} is not exact as a float")
    return now
