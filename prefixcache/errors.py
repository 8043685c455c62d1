"""Typed errors raised by the allocator package.

Every check in the package is an explicit ``if ...: raise`` with one of these classes,
so behaviour is identical under ``python -O``. Each class also inherits the builtin that
upstream's tests expect for the same misuse, so ``pytest.raises(ValueError)`` (or
``KeyError`` / ``AssertionError`` where upstream pinned those) keeps working::

    PrefixCacheError(Exception)
    +-- InvalidArgumentError(ValueError)   bad sizes, negative counts, wrong types,
    |                                      duplicate ids, misuse of a read-only view
    +-- NoFreeBlocksError(ValueError)      no free block to satisfy the request
    +-- InvalidBlockError(ValueError)      block not held by this allocator: foreign,
    |   |                                  never allocated, stale, wrong state
    |   +-- UnknownBlockIdError(KeyError)  a block id this component does not own
    |   +-- DoubleFreeError(AssertionError) freeing an id-less block / refcount below 0
    |   +-- ForkError                      forking a chain that holds a freed block
    +-- BlockFullError(ValueError)         appending more tokens than the block has room
    +-- ImmutableBlockError(ValueError)    appending to a hashed/computed/null block
    +-- SwapError(ValueError)              blocks not on the source device, src == dst
    +-- UnknownDeviceError(KeyError)       device missing or not known to the allocator
"""

from __future__ import annotations

__all__ = [
    "BlockFullError",
    "DoubleFreeError",
    "ForkError",
    "ImmutableBlockError",
    "InvalidArgumentError",
    "InvalidBlockError",
    "NoFreeBlocksError",
    "PrefixCacheError",
    "SwapError",
    "UnknownBlockIdError",
    "UnknownDeviceError",
]


class PrefixCacheError(Exception):
    """Base class of every error raised on purpose by ``prefixcache``."""


class InvalidArgumentError(PrefixCacheError, ValueError):
    """An argument is malformed: bad size, negative count, wrong type, duplicate id."""


class NoFreeBlocksError(PrefixCacheError, ValueError):
    """The allocator has no free block (hashless or evictable) for the request.

    Raised before any state changes: a failed request leaves the allocator untouched.
    """


class InvalidBlockError(PrefixCacheError, ValueError):
    """The block (or id) is not in a state this allocator can act on.

    Covers blocks of another allocator instance or implementation, blocks that were
    never allocated, stale handles whose id has refcount 0, and ids in the wrong state.
    """


class UnknownBlockIdError(InvalidBlockError, KeyError):
    """A block id that this allocator / refcounter / evictor does not own."""

    __str__ = Exception.__str__


class DoubleFreeError(InvalidBlockError, AssertionError):
    """A block is freed twice, or a refcount would drop below zero."""


class ForkError(InvalidBlockError):
    """A chain to fork contains a freed (id-less or refcount-0) block."""


class BlockFullError(PrefixCacheError, ValueError):
    """More tokens were given than the block has empty slots."""


class ImmutableBlockError(PrefixCacheError, ValueError):
    """The block cannot take tokens: it is hashed, computed, or a null block."""


class SwapError(PrefixCacheError, ValueError):
    """A swap names blocks not on the source device, or the same source and target."""


class UnknownDeviceError(PrefixCacheError, KeyError):
    """The device is ``None`` or not one this allocator manages."""

    __str__ = Exception.__str__
