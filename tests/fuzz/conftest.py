"""Shared fixtures for the fuzz tests: quiet allocator logs, the session's selection kept, the
bundled target, a zoo mutant."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from properties.core import selection
from properties.core.targets import DEFAULT_SPEC, Target, load_target

#: A zoo mutant the block-level harness finds within a few executions.
MUTANT_SPEC = "tests.zoo.v0.broken:cow_not_recorded"


@pytest.fixture(autouse=True)
def _quiet_allocator_logs() -> None:
    logging.getLogger("prefixcache").setLevel(logging.ERROR)


@pytest.fixture(autouse=True)
def _kept_selection() -> Iterator[None]:
    """A machine harness selects the target it runs (the machines read the selection): the
    session's selection survives each test."""
    with selection.kept():
        yield


@pytest.fixture(scope="session")
def bundled() -> Target:
    return load_target(DEFAULT_SPEC)


@pytest.fixture(scope="session")
def mutant() -> Target:
    return load_target(MUTANT_SPEC)
