"""The model agrees with the bundled allocator over long operation sequences.

Both state machines run against ``prefixcache`` with pools pinned to several shapes (block
sizes 1..16, pools from tiny to roomy, with and without a CPU pool) and long programs; the
oracle (model + shadow KV memory) must accept every step. A false alarm here is a model bug.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, run_state_machine_as_test

from models.families.v0.capabilities import Config
from properties.core import selection
from properties.families.v0.machines.block_level import BlockLevelMachine
from properties.families.v0.machines.sequence_level import SequenceLevelMachine
from properties.families.v0.strategies import tokens

SHAPES = [(1, 3, 2), (2, 6, 0), (3, 5, 3), (4, 8, 4), (8, 4, 2), (16, 12, 6)]
STEPS = 300
EXAMPLES = 4
LONG = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
                derandomize=True, database=None,
                phases=[Phase.generate, Phase.shrink],
                suppress_health_check=list(HealthCheck))


@pytest.fixture(autouse=True)
def bundled_target() -> None:
    selection.select(None)


@pytest.mark.parametrize(("block_size", "gpu", "cpu"), SHAPES)
def test_block_level_agreement(block_size: int, gpu: int, cpu: int) -> None:
    caps = selection.current_target().caps

    class Pinned(BlockLevelMachine):
        @initialize(config=st.just(Config(block_size, gpu, cpu, caps)))
        def start(self, config: Config) -> None:
            self.setup(config)

    run_state_machine_as_test(Pinned, settings=LONG)


@pytest.mark.parametrize(("block_size", "gpu", "cpu"), SHAPES)
def test_sequence_level_agreement(block_size: int, gpu: int, cpu: int) -> None:
    caps = selection.current_target().caps

    class Pinned(SequenceLevelMachine):
        @initialize(config=st.just(Config(block_size, gpu, cpu, caps)), data=st.data())
        def start(self, config: Config, data: st.DataObject) -> None:
            self.setup(config)
            self.prompts = data.draw(st.lists(tokens(block_size, 3 * block_size), min_size=1,
                                              max_size=3), label="system prompts")

    run_state_machine_as_test(Pinned, settings=LONG)
