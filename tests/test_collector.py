"""``properties.core.collector``: the young threshold is raised for a machine run, and only
there; everything else about the collector is left as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, rule

from properties.core.collector import YOUNG_THRESHOLD, machine_collector


@pytest.fixture
def threshold() -> Iterator[tuple[int, ...]]:
    saved = gc.get_threshold()
    yield saved
    gc.set_threshold(*saved)


def test_raised_inside_and_restored_after(threshold: tuple[int, ...]) -> None:
    gc.set_threshold(700, 7, 3)
    with machine_collector():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 7, 3)
    assert gc.get_threshold() == (700, 7, 3)


def test_restored_when_the_run_raises(threshold: tuple[int, ...]) -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(KeyError), machine_collector():
        raise KeyError("a failing example")
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("young", [0, YOUNG_THRESHOLD * 2])
def test_off_or_higher_is_left_alone(threshold: tuple[int, ...], young: int) -> None:
    gc.set_threshold(young, 10, 10)
    with machine_collector():
        assert gc.get_threshold() == (young, 10, 10)
    assert gc.get_threshold() == (young, 10, 10)


class _SeesTheThreshold(RuleBasedStateMachine):
    """Its rule fails unless the plugin raised the threshold around this test."""

    @rule()
    def look(self) -> None:
        assert gc.get_threshold()[0] >= YOUNG_THRESHOLD


TestThePluginRaisesItForAStateMachineTest = _SeesTheThreshold.TestCase
TestThePluginRaisesItForAStateMachineTest.settings = settings(max_examples=2,
                                                              stateful_step_count=2,
                                                              database=None)


def test_the_plugin_leaves_other_tests_alone() -> None:
    assert gc.get_threshold()[0] < YOUNG_THRESHOLD
