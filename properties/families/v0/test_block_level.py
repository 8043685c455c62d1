"""The block-level conformance state machine, collected by pytest: the selected allocator
type, then the target's naive type."""

from properties.families.v0.machines.block_level import NaiveBlockLevelMachine, TestBlockLevel
from properties.families.v0.machines.variants import NaiveVariantTest

__all__ = ["TestBlockLevel", "TestBlockLevelNaive"]


class TestBlockLevelNaive(NaiveVariantTest, NaiveBlockLevelMachine.TestCase):  # type: ignore[misc,valid-type]
    """The machine against the target's naive allocator type (see NaiveVariantTest)."""
