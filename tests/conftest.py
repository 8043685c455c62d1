"""Fixtures shared by the test packages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from properties.core import selection


@pytest.fixture
def restore_target() -> Iterator[None]:
    """Whatever target was selected before the test is selected again after it."""
    with selection.kept():
        yield
