"""The block-level conformance state machine, collected by pytest."""

from properties.machines.block_level import TestBlockLevel

__all__ = ["TestBlockLevel"]
