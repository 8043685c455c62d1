"""The sequence-level conformance state machine, collected by pytest: the selected allocator
type, then the target's naive type."""

from properties.families.v0.machines.sequence_level import (
    NaiveSequenceLevelMachine,
    TestSequenceLevel,
)
from properties.families.v0.machines.variants import NaiveVariantTest

__all__ = ["TestSequenceLevel", "TestSequenceLevelNaive"]


class TestSequenceLevelNaive(NaiveVariantTest, NaiveSequenceLevelMachine.TestCase):  # type: ignore[misc,valid-type]
    """The machine against the target's naive allocator type (see NaiveVariantTest)."""
