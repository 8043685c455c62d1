"""Typed errors of the bundled SGLang reference (``prefixcache.sglang``).

Every check is an explicit ``if ...: raise`` (never ``assert``), and every raise happens before
any state changes, so a caught error leaves the cache and the allocator exactly as they were::

    PrefixCacheError (prefixcache.errors)
    +-- SGLangCacheError
        +-- InvalidArgumentError(ValueError)  bad sizes, a value shorter than its key, a
        |                                     negative token count, a page-misaligned size
        +-- LockUnderflowError(ValueError)    dec_lock_ref on a node whose lock count is 0
        +-- ReceiptMismatchError(ValueError)  dec_lock_ref with another node's receipt
        +-- NodeNotInTreeError(ValueError)    a node of another tree, or one already evicted
        +-- InvalidSlotError(ValueError)      a slot outside the pool, or the padding slot 0
        +-- DoubleFreeError(ValueError)       freeing a slot that is free (or never allocated),
        |                                     or the same slot twice in one call
        +-- TombstonedWindowError(ValueError) locking a node whose window lost its SWA KV
        +-- RequestStateError(ValueError)     a request API call on a request without a row,
                                              or publishing KV it has not computed
"""

from __future__ import annotations

from prefixcache.errors import PrefixCacheError

__all__ = [
    "DoubleFreeError",
    "InvalidArgumentError",
    "InvalidSlotError",
    "LockUnderflowError",
    "NodeNotInTreeError",
    "ReceiptMismatchError",
    "RequestStateError",
    "SGLangCacheError",
    "TombstonedWindowError",
]


class SGLangCacheError(PrefixCacheError):
    """Base of every error the SGLang reference raises."""


class InvalidArgumentError(SGLangCacheError, ValueError):
    """An argument no call accepts: negative sizes, a value shorter than the key, ..."""


class LockUnderflowError(SGLangCacheError, ValueError):
    """``dec_lock_ref`` on a node whose lock count is already 0 (a double unlock)."""


class ReceiptMismatchError(SGLangCacheError, ValueError):
    """``dec_lock_ref`` given the receipt ``inc_lock_ref`` returned for another node."""


class NodeNotInTreeError(SGLangCacheError, ValueError):
    """A node handle that is not (or no longer) in this tree: foreign, or evicted."""


class InvalidSlotError(SGLangCacheError, ValueError):
    """A KV slot id outside ``1..size`` (slot 0 is the reserved padding slot)."""


class DoubleFreeError(SGLangCacheError, ValueError):
    """Freeing a slot that is free already, was never allocated, or repeats in the call."""


class TombstonedWindowError(SGLangCacheError, ValueError):
    """``inc_lock_ref`` on a node whose last ``sliding_window_size`` tokens are not all held
    with their SWA KV (a stale match: SWA eviction dropped part of its window)."""


class RequestStateError(SGLangCacheError, ValueError):
    """A request API call the request's state forbids: it holds no row (released already, or
    never admitted), or ``up_to`` reaches past the KV it computed (or before its protected
    prefix)."""
