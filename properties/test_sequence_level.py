"""The sequence-level conformance state machine, collected by pytest."""

from properties.machines.sequence_level import TestSequenceLevel

__all__ = ["TestSequenceLevel"]
