"""The pool machine against the session's pool (``--allocator``, family ``v1``), shaped to fit
its capabilities (:func:`~properties.families.v1.machine.default_config`), and the replay of
each ``--xfails-file`` entry.

A run whose session target is another family's skips here, saying how to select a pool. The
session's applicable xfails entries' ``avoid`` (generator features the machine leaves out,
:data:`~properties.families.v1.machine.AVOIDABLE`) apply to the machine of the run. Robustness
findings of the misuse probes are printed in the terminal summary and never fail the run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from properties.core.expected import machine_session, replay_expected
from properties.core.plugin import ExpectedFailure
from properties.families.v1.family import FAMILY
from properties.families.v1.machine import PoolMachine, bind, checked_avoid


@pytest.fixture(autouse=True)
def _pool_session(request: pytest.FixtureRequest) -> Iterator[None]:
    yield from machine_session(request.config, FAMILY.name, "the pool machine",
                               "properties.upstream:vllm_v1_block_pool", PoolMachine, checked_avoid)


TestPoolLevel = bind(name="PoolLevelMachine").TestCase


def test_expected_failure(expected_failure: ExpectedFailure,
                          request: pytest.FixtureRequest) -> None:
    replay_expected(expected_failure, request.config)
