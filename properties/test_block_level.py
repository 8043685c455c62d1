"""The block-level conformance state machine, collected by pytest: the selected allocator
type, then the target's naive type."""

import hypothesis

from properties.machines.block_level import NaiveBlockLevelMachine, TestBlockLevel
from properties.machines.variants import NAIVE_SHARE, naive_variant

__all__ = ["TestBlockLevel", "TestBlockLevelNaive"]


class TestBlockLevelNaive(NaiveBlockLevelMachine.TestCase):  # type: ignore[valid-type,misc]
    settings: hypothesis.settings  # the profile's, from the base class

    def setUp(self) -> None:
        why = naive_variant()
        if isinstance(why, str):
            self.skipTest(why)
        # A naive allocator caches nothing, so far fewer states: a fraction of the profile's
        # examples (at least one) covers it.
        base = self.settings
        self.settings = hypothesis.settings(
            base, max_examples=max(1, base.max_examples // NAIVE_SHARE))
