"""The request machine against the session's manager (``--allocator``, family ``v1-manager``),
once per manager configuration (full attention, sliding window, hybrid full + sliding window
with equal and with different block sizes, full attention with the stats logged), and the
replay of each ``--xfails-file`` entry.

A run whose session target is another family's skips here, saying how to select a manager.
The session's applicable xfails entries' ``avoid`` (generator features the machine leaves out)
apply to every machine of the run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from properties.core.expected import machine_session, replay_expected
from properties.core.plugin import ExpectedFailure
from properties.families.v1.request.family import FAMILY
from properties.families.v1.request.machine import ManagerMachine, bind, checked_avoid
from properties.families.v1.request.target import FULL, FULL_STATS, HYBRID, HYBRID_MIXED, WINDOW


@pytest.fixture(autouse=True)
def _manager_session(request: pytest.FixtureRequest) -> Iterator[None]:
    yield from machine_session(request.config, FAMILY.name, "the request level",
                               "properties.upstream:vllm_v1_manager", ManagerMachine, checked_avoid)


TestFull = bind(FULL, "FullMachine").TestCase
TestWindow = bind(WINDOW, "WindowMachine").TestCase
TestHybrid = bind(HYBRID, "HybridMachine").TestCase
TestHybridMixed = bind(HYBRID_MIXED, "HybridMixedMachine").TestCase
TestFullStats = bind(FULL_STATS, "FullStatsMachine").TestCase


def test_expected_failure(expected_failure: ExpectedFailure,
                          request: pytest.FixtureRequest) -> None:
    replay_expected(expected_failure, request.config)
