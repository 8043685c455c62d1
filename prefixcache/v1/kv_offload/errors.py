"""Typed errors of the CPU offload tier.

Each derives from the v0 package's bases (``except PrefixCacheError`` catches every family)
and, where upstream 0.34.0 asserts on the same misuse, from ``AssertionError`` too::

    OffloadArgumentError(InvalidArgumentError)          bad size, threshold, policy, duplicate key
    KeyNotLoadableError(InvalidBlockError, AssertionError)
                                                        prepare_load of a key not stored and ready
    LoadNotPreparedError(InvalidBlockError, AssertionError)
                                                        complete_load without a load in flight
    StoreNotPendingError(InvalidBlockError, AssertionError)
                                                        complete_store of a key with no pending
                                                        write (never prepared, or completed twice)
    RequestFinishedError(InvalidBlockError, AssertionError)
                                                        new keys offered after on_request_finished

Every check runs before any state changes: a raised error leaves the manager as it was.
"""

from __future__ import annotations

from prefixcache.errors import InvalidArgumentError, InvalidBlockError, PrefixCacheError

__all__ = [
    "KeyNotLoadableError",
    "LoadNotPreparedError",
    "OffloadArgumentError",
    "PrefixCacheError",
    "RequestFinishedError",
    "StoreNotPendingError",
]


class OffloadArgumentError(InvalidArgumentError):
    """A malformed argument: negative size, threshold below 1, unknown policy, a key twice."""


class KeyNotLoadableError(InvalidBlockError, AssertionError):
    """``prepare_load`` names a key that is not stored, or whose write is still pending."""


class LoadNotPreparedError(InvalidBlockError, AssertionError):
    """``complete_load`` names a key with no load in flight (more completions than loads)."""


class StoreNotPendingError(InvalidBlockError, AssertionError):
    """``complete_store`` names a key without a pending write: never prepared, or completed."""


class RequestFinishedError(InvalidBlockError, AssertionError):
    """A finished request offers or loads keys it had not used before finishing."""
