"""Typed errors of the v1 pool.

Each class derives from the v0 package's base classes (so ``except PrefixCacheError`` catches
both families) and, where upstream 0.33.0 raises a builtin for the same misuse, from that builtin
too, so an engine's ``except ValueError`` / ``except AssertionError`` keeps working::

    NoFreeBlocksError(ValueError)                   not enough free blocks (upstream: ValueError)
    PoolArgumentError(InvalidArgumentError, AssertionError)
                                                    bad size, count, mask length, alignment
    MissingBlockHashesError(InvalidArgumentError, IndexError)
                                                    request.block_hashes too short for the call
    ForeignBlockError(InvalidBlockError)            block object not owned by this pool
    UnheldBlockError(InvalidBlockError)             caching/moving a block nobody holds
    DoubleFreeError(InvalidBlockError, AssertionError)
                                                    ref_cnt would drop below zero
    CacheConflictError(InvalidBlockError, AssertionError)
                                                    a second key for the same prefix length,
                                                    or a key on a block that cannot take one
    InvalidBlockIdError(InvalidBlockError, AssertionError)
                                                    block id outside ``[0, num_gpu_blocks)``
    FreeQueueError(InvalidBlockError, RuntimeError) free-queue misuse (upstream: RuntimeError)

Every check runs before any state changes: a raised error leaves the pool as it was.
"""

from __future__ import annotations

from prefixcache.errors import (
    DoubleFreeError,
    InvalidArgumentError,
    InvalidBlockError,
    NoFreeBlocksError,
    PrefixCacheError,
)

__all__ = [
    "CacheConflictError",
    "DoubleFreeError",
    "ForeignBlockError",
    "FreeQueueError",
    "InvalidArgumentError",
    "InvalidBlockError",
    "InvalidBlockIdError",
    "MissingBlockHashesError",
    "NoFreeBlocksError",
    "PoolArgumentError",
    "PrefixCacheError",
    "UnheldBlockError",
]


class PoolArgumentError(InvalidArgumentError, AssertionError):
    """An argument upstream asserts on: non-positive sizes, misaligned token counts,
    a ``block_mask`` of the wrong length, counts outside the block list."""


class MissingBlockHashesError(InvalidArgumentError, IndexError):
    """``request.block_hashes`` has fewer entries than the call needs."""


class ForeignBlockError(InvalidBlockError):
    """The block object is not one of this pool's ``blocks`` (another pool's, or made by hand)."""


class UnheldBlockError(InvalidBlockError):
    """The block has ``ref_cnt == 0``: nobody holds it, so its contents are not a request's KV."""


class CacheConflictError(InvalidBlockError, AssertionError):
    """The block already has a key for this (or a longer) prefix length, so a second key would
    claim contents the block cannot hold both of; or the block cannot carry keys at all."""


class InvalidBlockIdError(InvalidBlockError, AssertionError):
    """A block id outside ``[0, num_gpu_blocks)`` (negative ids included)."""


class FreeQueueError(InvalidBlockError, RuntimeError, AssertionError):
    """A free-queue operation on a block in the wrong state: removing a block that is not queued,
    queueing one that already is, or the same block twice in one batch; or a queue whose
    sentinel links were broken from outside. Also an ``AssertionError``: upstream asserts these
    states, and its own queue tests expect that class."""
