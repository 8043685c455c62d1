"""The session's target: chosen once (by the pytest plugin, a CLI or the environment) and read
by every state machine and harness. Loading is lazy, so selecting a target that cannot be
imported fails the tests that use it, not the whole session. The per-step time limit
(``--step-timeout``) is chosen with the target and carried by it (``Target.step_timeout``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace

from properties.core import family as families
from properties.core.roles import Tolerating
from properties.core.targets import (
    ENV_VAR,
    Target,
    load_target,
    set_session_step_timeout,
    step_timeout_setting,
)

_current: Target | None = None
_tolerated: frozenset[str] = frozenset()  # upstream deviations the model follows (xfails)
_choice: tuple[str | None, str | None, tuple[str, ...], float | str | None] = (
    None, None, (), None)
_family: str | None = None  # --family NAME (None: detected from the spec)


def select(spec: str | None = None, *, allocator_type: str | None = None,
           disable: Iterable[str] = (), step_timeout: float | str | None = None,
           family: str | None = None) -> None:
    """Choose the target for this process; it is loaded on first use, by ``family`` (a
    family name; None: detected, :func:`properties.core.family.select`). ``step_timeout``
    (seconds; ``None``: ``$PREFIXCACHE_STEP_TIMEOUT`` or the default; ``<= 0``: no limit) is
    validated now (a bad value raises ``TargetError``) and becomes the process's default for
    every target loaded afterwards."""
    global _current, _choice, _family
    if family is not None:
        families.by_name(family)  # an unknown name fails now
    _current = None
    set_session_step_timeout(step_timeout)  # also for targets loaded elsewhere (variants)
    _choice = (spec, allocator_type, tuple(disable), step_timeout)
    _family = family


def family_of(spec: str | None, name: str | None = None) -> str:
    """The name of the family that judges ``spec`` (default ``$PREFIXCACHE_ALLOCATOR``):
    ``name`` if given, else the family that accepts it, else the default family."""
    return families.select(spec or os.environ.get(ENV_VAR) or None, name).name


def family_name() -> str:
    """The name of the selected target's family (without loading the target)."""
    return family_of(_choice[0], _family)


def chosen_family() -> families.Family:
    """The selected target's family (without loading the target)."""
    return families.select(_choice[0] or os.environ.get(ENV_VAR) or None, _family)


def step_timeout() -> float | None:
    """The chosen per-step time limit in seconds (``None``: no limit)."""
    return step_timeout_setting(_choice[3])


def current_target() -> Target:
    """The selected target; defaults to ``$PREFIXCACHE_ALLOCATOR`` or the bundled allocator."""
    global _current
    if _current is None:
        spec, allocator_type, disable, seconds = _choice
        _current = load_target(spec, family=_family, allocator_type=allocator_type,
                               disable=disable, step_timeout=seconds)
        _current = tolerating(_current, _tolerated)
    return _current


def tolerating(target: Target, names: frozenset[str]) -> Target:
    """``target`` with its model following the upstream deviations ``names`` (its family's
    :class:`~properties.core.roles.Tolerating` role); a family without the role follows none,
    so any name is a ``ValueError``."""
    if not names:
        return target
    family = target.family_object
    if not isinstance(family, Tolerating):
        raise ValueError(f"family {family.name!r} follows no upstream deviation "
                         f"(tolerate: {sorted(names)})")
    return replace(target, caps=family.tolerating(target.caps, names))


def tolerate(names: frozenset[str]) -> None:
    """Have the model follow these upstream deviations (the family's tolerable ones,
    :class:`~properties.core.roles.Tolerating`) for the selected target: the xfails entries
    that declare them (``properties.core.plugin``). The names are validated now, against the
    chosen family (named, else detected from the chosen spec)."""
    global _current, _tolerated
    chosen = families.select(_choice[0] or os.environ.get(ENV_VAR) or None, _family) \
        if names else None
    known: Mapping[str, str] = chosen.tolerable if isinstance(chosen, Tolerating) else {}
    bad = names - known.keys()
    if bad:
        raise ValueError(f"unknown tolerated deviation(s) {sorted(bad)}; known: "
                         f"{sorted(known)}")
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
