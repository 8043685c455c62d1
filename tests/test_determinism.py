"""The local-constants pool of Hypothesis is empty inside ``fixed_constants`` and restored
after it (see ``properties.core.determinism``)."""

from __future__ import annotations

import pytest

from properties.core.determinism import fixed_constants

providers = pytest.importorskip(
    "hypothesis.internal.conjecture.providers",
    reason="this Hypothesis version has no constants pool to pin",
)


def test_pool_is_empty_inside_and_restored_after() -> None:
    harvest = providers._get_local_constants
    with fixed_constants():
        assert providers._get_local_constants is not harvest
        pools = vars(providers._get_local_constants())
        assert "integers" in pools and all(len(pool) == 0 for pool in pools.values())
    assert providers._get_local_constants is harvest


@pytest.mark.parametrize("machine", ["block", "sequence"])
def test_configs_follow_the_target_selected_when_the_example_starts(
        machine: str, restore_target: None) -> None:
    """A machine class run against one target and then another draws the second one's
    capabilities (``st.deferred`` kept the first one's for the whole process: the model then
    judged the second target by the first one's claims and rejected its examples, so a
    seeded search depended on what had run before it)."""
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from properties.core import selection
    from properties.core.targets import load_target
    from properties.families.v0.machines.block_level import BlockLevelMachine
    from properties.families.v0.machines.sequence_level import SequenceLevelMachine

    base = BlockLevelMachine if machine == "block" else SequenceLevelMachine
    seen: list[object] = []

    class Probe(base):  # type: ignore[valid-type,misc]
        def teardown(self) -> None:
            seen.append(self.config.caps)
            super().teardown()

    once = settings(max_examples=1, stateful_step_count=1, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))
    spec = "prefixcache.cpu_gpu_block_allocator:CpuGpuBlockAllocator.create"
    for allocator_type in ("prefix_caching", "naive"):  # the second has fewer capabilities
        target = load_target(spec, allocator_type=allocator_type)
        selection.use(target)
        seen.clear()
        run_state_machine_as_test(Probe, settings=once)
        assert seen and all(caps == target.caps for caps in seen), allocator_type
