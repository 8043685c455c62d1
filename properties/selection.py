"""The session's target: chosen once (by the pytest plugin, a CLI or the environment) and read
by every state machine and harness. Loading is lazy, so selecting a target that cannot be
imported fails the tests that use it, not the whole session."""

from __future__ import annotations

from collections.abc import Iterable

from properties.targets import Target, load_target

_current: Target | None = None
_choice: tuple[str | None, str, tuple[str, ...]] = (None, "prefix_caching", ())


def select(spec: str | None = None, *, allocator_type: str = "prefix_caching",
           disable: Iterable[str] = ()) -> None:
    """Choose the target for this process; it is loaded on first use."""
    global _current, _choice
    _current = None
    _choice = (spec, allocator_type, tuple(disable))


def current_target() -> Target:
    """The selected target; defaults to ``$PREFIXCACHE_ALLOCATOR`` or the bundled allocator."""
    global _current
    if _current is None:
        spec, allocator_type, disable = _choice
        _current = load_target(spec, allocator_type=allocator_type, disable=disable)
    return _current


def use(target: Target) -> None:
    """Select an already-built target (self-tests use this for broken allocators)."""
    global _current
    _current = target
