"""Small shared helpers: the device enum, ceiling division and list chunking."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TypeVar

from prefixcache.errors import InvalidArgumentError

T = TypeVar("T")

__all__ = ["Device", "cdiv", "chunk_list"]


class Device(enum.Enum):
    """Where a block lives. Numbered by ``auto()``: GPU is 1, CPU is 2."""

    GPU = enum.auto()
    CPU = enum.auto()

    # Members compare by identity; ``Enum.__hash__`` hashes the name in Python on every
    # lookup of a per-device dict (each routed call), this is the C-level identity hash.
    __hash__ = object.__hash__


def cdiv(a: int, b: int) -> int:
    """Ceiling of ``a / b`` in exact integer arithmetic (also for negative ``a``)."""
    return -(a // -b)


def chunk_list(lst: Sequence[T], chunk_size: int) -> list[list[T]]:
    """Split ``lst`` into consecutive pieces of ``chunk_size`` (the last may be shorter).

    Returns a list, so callers that wrap the result in ``list(...)`` or iterate it
    once behave alike.
    """
    if chunk_size <= 0:
        raise InvalidArgumentError(f"chunk_size must be positive, got {chunk_size}")
    return [list(lst[i : i + chunk_size]) for i in range(0, len(lst), chunk_size)]
