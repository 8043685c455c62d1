"""Shared fixtures for the fuzz tests: quiet allocator logs, the bundled target, a zoo mutant
(``tests/conftest.py`` keeps the session's selection around each test)."""

from __future__ import annotations

import logging

import pytest

from properties.core.targets import DEFAULT_SPEC, Target, load_target

#: A zoo mutant the block-level harness finds within a few executions.
MUTANT_SPEC = "tests.zoo.v0.broken:cow_not_recorded"


@pytest.fixture(autouse=True)
def _quiet_allocator_logs() -> None:
    logging.getLogger("prefixcache").setLevel(logging.ERROR)


@pytest.fixture(scope="session")
def bundled() -> Target:
    return load_target(DEFAULT_SPEC)


@pytest.fixture(scope="session")
def mutant() -> Target:
    return load_target(MUTANT_SPEC)
