"""The session's target: chosen once (by the pytest plugin, a CLI or the environment) and read
by every state machine and harness. Loading is lazy, so selecting a target that cannot be
imported fails the tests that use it, not the whole session. The per-step time limit
(``--step-timeout``) is chosen with the target and carried by it (``Target.step_timeout``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from models.families.v0.capabilities import Capabilities, tolerating
from properties.core import family as families
from properties.core.targets import (
    Target,
    load_target,
    set_session_step_timeout,
    step_timeout_setting,
)

_current: Target | None = None
_tolerated: frozenset[str] = frozenset()  # upstream deviations the model follows (xfails)
_choice: tuple[str | None, str, tuple[str, ...], float | str | None] = (
    None, "prefix_caching", (), None)
_family: str | None = None  # a family other than the default chose the target (its name)


def select(spec: str | None = None, *, allocator_type: str = "prefix_caching",
           disable: Iterable[str] = (), step_timeout: float | str | None = None,
           family: str | None = None) -> None:
    """Choose the target for this process; it is loaded on first use. ``step_timeout``
    (seconds; ``None``: ``$PREFIXCACHE_STEP_TIMEOUT`` or the default; ``<= 0``: no limit) is
    validated now (a bad value raises ``TargetError``) and becomes the process's default for
    every target loaded afterwards. ``family``: its name (``--family``), else the family that
    accepts ``spec`` (:func:`properties.core.family.select`), else the default family."""
    global _current, _choice, _family
    _current = None
    set_session_step_timeout(step_timeout)  # also for targets loaded elsewhere (variants)
    _choice = (spec, allocator_type, tuple(disable), step_timeout)
    _family = family_of(spec, family)


def family_of(spec: str | None, name: str | None = None) -> str | None:
    """The name of the family that judges ``spec`` (``name`` wins), None for the default."""
    if name:
        families.by_name(name)  # an unknown name fails now
        return None if name == families.DEFAULT_FAMILY else name
    if not spec:
        return None
    for candidate in families.names():
        if candidate != families.DEFAULT_FAMILY and families.by_name(candidate).accepts(spec):
            return candidate
    return None


def family_name() -> str:
    """The selected family's name."""
    return _family or families.DEFAULT_FAMILY


def step_timeout() -> float | None:
    """The chosen per-step time limit in seconds (``None``: no limit)."""
    return step_timeout_setting(_choice[3])


def current_target() -> Target:
    """The selected target; defaults to ``$PREFIXCACHE_ALLOCATOR`` or the bundled allocator."""
    global _current
    if _current is None and _family is not None:
        spec, allocator_type, disable, seconds = _choice
        # A family's target is read through what every target offers (describe, spec,
        # allocator_type, step_timeout).
        _current = families.by_name(_family).load_target(
            spec, allocator_type=allocator_type, disable=disable, step_timeout=seconds)
    if _current is None:
        spec, allocator_type, disable, seconds = _choice
        _current = load_target(spec, allocator_type=allocator_type, disable=disable,
                               step_timeout=seconds)
        if _tolerated:
            _current = replace(_current, caps=tolerating(_current.caps, _tolerated))
    return _current


def tolerate(names: frozenset[str]) -> None:
    """Have the model follow these upstream deviations
    (``models.families.v0.capabilities.TOLERABLE``)
    for the selected target: the xfails entries that declare them (``properties.core.plugin``)."""
    global _current, _tolerated
    tolerating(Capabilities(), names)  # validates the names now
    _tolerated = names
    _current = None


def use(target: Target) -> None:
    """Select an already-built target (self-tests use this for broken allocators)."""
    global _current
    _current = target


@contextmanager
def kept() -> Iterator[None]:
    """On exit, the selection is what it was on entry: the same choice, and the same target
    if one was loaded (nothing is loaded here)."""
    global _current, _choice, _tolerated, _family
    saved = _current, _choice, _tolerated, _family
    try:
        yield
    finally:
        _current, _choice, _tolerated, _family = saved
