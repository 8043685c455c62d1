"""Examples that depend only on the seed, not on which modules happen to be imported.

Hypothesis (6.1xx) also draws, now and then, integer and string constants harvested from every
local (non-test) module imported so far. Which modules that is depends on test order, xdist
distribution and any edit anywhere in the tree, so under a derandomized profile the "same"
examples could still differ between two runs of one commit. Inside :func:`fixed_constants` that
pool is empty (Hypothesis's global pool of interesting values stays).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["fixed_constants"]


@contextmanager
def fixed_constants() -> Iterator[None]:
    """Generation without the local-constants pool. Private Hypothesis API: with a version
    that lacks it, nothing changes."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - another Hypothesis layout
        yield
        return
    harvest = getattr(providers, "_get_local_constants", None)
    empty = getattr(providers, "Constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if harvest is None or empty is None or cache is None:  # pragma: no cover
        yield
        return
    nothing = empty()
    providers._get_local_constants = lambda: nothing
    cache.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = harvest
        cache.cache.clear()
