"""The evictor-level conformance state machine, collected by pytest (skipped, with the reason,
for a target whose allocator has no evictor the suite can build)."""

from properties.families.v0.machines.evictor_level import TestEvictorLevel

__all__ = ["TestEvictorLevel"]
