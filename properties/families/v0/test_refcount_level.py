"""The refcount-level conformance state machine, collected by pytest (skipped, with the reason,
for a target whose allocator has no RefCounter/CopyOnWriteTracker the suite can build)."""

from properties.families.v0.machines.refcount_level import TestRefcountLevel

__all__ = ["TestRefcountLevel"]
