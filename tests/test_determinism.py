"""The local-constants pool of Hypothesis is empty inside ``fixed_constants`` and restored
after it (see ``properties.determinism``)."""

from __future__ import annotations

import pytest

from properties.determinism import fixed_constants

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
