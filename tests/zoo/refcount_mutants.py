"""Broken reference counters and copy-on-write trackers (API.md section 7). Every ``# BUG``
line is the one change from the bundled class; :class:`RefcountPluggable` builds the allocator
with them (the GPU allocator's ``_refcounter`` and ``_cow_tracker`` are the broken classes, so
the refcount machine, ``properties.machines.refcount_level``, builds fresh ones of them).

Allocator-level programs rarely or never show these: the allocators never ``decr`` at 0, never
``incr`` through the view, never record a ``None`` pair, and drain the pairs they record."""

from __future__ import annotations

from typing import Any, ClassVar

from prefixcache.common import CopyOnWriteTracker, ReadOnlyRefCounter, RefCounter
from prefixcache.interfaces import Block
from tests.zoo.plumbing import PluggableAllocator


class RefcountPluggable(PluggableAllocator):
    """``PluggableAllocator`` whose counter (shared with its hashless allocator) is a
    ``refcounter_class`` and whose CoW trackers are ``cow_tracker_class`` over its view."""

    refcounter_class: ClassVar[type[RefCounter]] = RefCounter
    cow_tracker_class: ClassVar[type[CopyOnWriteTracker]] = CopyOnWriteTracker

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        counter = self.refcounter_class(self._refcounter._refcounts)  # every id, all at 0
        hashless = self._hashless_allocator
        self._refcounter = hashless._refcounter = counter
        self._cow_tracker = hashless._cow_tracker = self.cow_tracker_class(counter.as_readonly())


class IncrThroughView(ReadOnlyRefCounter):
    """A read-only view whose ``incr`` goes through to the counter."""

    def incr(self, block_id: int) -> int:
        return self._refcounter.incr(block_id)  # BUG: was a ValueError


class LeakyViewRefCounter(RefCounter):
    def as_readonly(self) -> ReadOnlyRefCounter:
        return IncrThroughView(self)


class ClampingRefCounter(RefCounter):
    """``decr`` at 0 stays at 0 without an error."""

    def decr(self, block_id: int) -> int:
        if self.get(block_id) == 0:  # BUG: was an AssertionError (DoubleFreeError)
            return 0
        return super().decr(block_id)


class SnapshotView(ReadOnlyRefCounter):
    """A read-only view of a new counter over the same ids (all at 0), not of its own."""

    def __init__(self, refcounter: RefCounter) -> None:
        super().__init__(RefCounter(refcounter._refcounts))  # BUG: was refcounter itself


class SnapshotViewRefCounter(RefCounter):
    def as_readonly(self) -> ReadOnlyRefCounter:
        return SnapshotView(self)


class StickyCowTracker(CopyOnWriteTracker):
    """``clear_cows`` returns the pairs but keeps them."""

    def clear_cows(self) -> list[tuple[int, int]]:
        return self.pending()  # BUG: the list is not reset


class SharedByTwoCowTracker(CopyOnWriteTracker):
    """``is_appendable`` also lets a block shared by two be written in place."""

    def is_appendable(self, block: Block) -> bool:
        block_id = block.block_id
        return block_id is None or self._refcounter.get(block_id) <= 2  # BUG: was <= 1


class NoneTolerantCowTracker(CopyOnWriteTracker):
    """``record_cow`` records a pair with a ``None`` id."""

    def record_cow(self, src_block_id: int | None, trg_block_id: int | None) -> None:
        self._copy_on_writes.append((src_block_id, trg_block_id))  # type: ignore[arg-type]  # BUG


class LeakyViewAllocator(RefcountPluggable):
    refcounter_class = LeakyViewRefCounter


class ClampingAllocator(RefcountPluggable):
    refcounter_class = ClampingRefCounter


class SnapshotViewAllocator(RefcountPluggable):
    refcounter_class = SnapshotViewRefCounter


class StickyCowAllocator(RefcountPluggable):
    cow_tracker_class = StickyCowTracker


class SharedByTwoAllocator(RefcountPluggable):
    cow_tracker_class = SharedByTwoCowTracker


class NoneTolerantCowAllocator(RefcountPluggable):
    cow_tracker_class = NoneTolerantCowTracker
