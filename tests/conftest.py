"""Fixtures shared by the test packages."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from properties.core import family as families
from properties.core import selection


@pytest.fixture(autouse=True)
def restore_target() -> Iterator[None]:
    """Whatever target was selected before the test is selected again after it, in every test:
    a fuzz harness or a zoo run selects the target it drives (the machines read the selection),
    and a later test in the same worker must not run its machines on that target."""
    with selection.kept():
        yield


@pytest.fixture(autouse=True)
def _families_declared_by_reference_stay_in_their_test() -> Iterator[None]:
    """A family loaded by reference (``tests.toy.family:FAMILY``) declares itself in
    ``$PREFIXCACHE_FAMILIES`` for the replays it starts; a later test's subprocess, run
    without this checkout on its path, must not inherit a family it cannot import."""
    before = os.environ.get(families.ENV_VAR)
    yield
    if before is None:
        os.environ.pop(families.ENV_VAR, None)
    else:
        os.environ[families.ENV_VAR] = before
