"""Broken reference counters and copy-on-write trackers (docs/API.md §7): patches of
``prefixcache/common.py``, each change marked ``# BUG`` in the patched source. Every allocator
of the copy counts with them, and the refcount machine
(``properties.families.v0.machines.refcount_level``) builds fresh ones of the target's classes.

Allocator-level programs rarely or never show these: the allocators never ``decr`` at 0, never
``incr`` through the view, never record a ``None`` pair, and drain the pairs they record."""

from __future__ import annotations

from tests.zoo.patching import Patch


def _common(scope: str, find: str, replace: str) -> tuple[Patch, ...]:
    return (Patch("common", scope, find, replace),)


#: A read-only view whose ``incr`` goes through to the counter.
LEAKY_VIEW = _common("ReadOnlyRefCounter.incr",
                     'raise InvalidArgumentError("incr is not allowed on a read-only refcounter")',
                     "return self._refcounter.incr(block_id)  # BUG: was an error")

#: ``decr`` at 0 stays at 0 without an error.
CLAMPING = _common("RefCounter.decr",
                   'raise DoubleFreeError(f"refcount of block {block_id} is already 0")',
                   "return 0  # BUG: was a DoubleFreeError")

#: ``as_readonly`` views a new counter over the same ids (all at 0), not this one.
SNAPSHOT_VIEW = _common("RefCounter.as_readonly", "return ReadOnlyRefCounter(self)",
                        "return ReadOnlyRefCounter(RefCounter(self._refcounts))  # BUG")

#: ``clear_cows`` returns the pairs but keeps them.
STICKY_COW = _common("CopyOnWriteTracker.clear_cows",
                     "cows = self._copy_on_writes\nself._copy_on_writes = []",
                     "cows = list(self._copy_on_writes)  # BUG: the pairs are kept")

#: ``is_appendable`` also lets a block shared by two be written in place.
SHARED_BY_TWO = _common("CopyOnWriteTracker.is_appendable",
                        "return self._refcounter.get(block_id) <= 1",
                        "return self._refcounter.get(block_id) <= 2  # BUG: was <= 1")

#: ``record_cow`` records a pair with a ``None`` id.
NONE_TOLERANT_COW = _common("CopyOnWriteTracker.record_cow",
                            "if src_block_id is None or trg_block_id is None:",
                            "if False:  # BUG: a pair with a None id is recorded")
