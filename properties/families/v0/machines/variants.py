"""The selected target built as its other allocator type: a factory takes ``allocator_type``
(``"prefix_caching"`` or ``"naive"``), and both are the target's to get right."""

from __future__ import annotations

import dataclasses
import unittest

import hypothesis

from properties.core.selection import current_target
from properties.core.targets import Target, TargetError, load_target

#: Features a user may switch off; switched off in the selected target, off in its variant too.
_FEATURES = ("swap", "extra_keys", "atomic", "typed_errors", "introspection")

_cache: dict[int, tuple[Target, Target | str]] = {}


def naive_variant() -> Target | str:
    """The selected target with ``allocator_type="naive"`` (same factory, factory keyword
    arguments and disabled features), or why there is none."""
    target = current_target()
    hit = _cache.get(id(target))
    if hit is not None and hit[0] is target:
        return hit[1]
    variant: Target | str
    if target.allocator_type == "naive":
        variant = "the selected allocator type is already naive (the main machines cover it)"
    else:
        try:
            naive = load_target(target.spec, allocator_type="naive")
        except TargetError as exc:
            variant = f"the target cannot build a naive allocator: {exc}"
        else:
            off = [f for f in _FEATURES if not getattr(target.caps, f)]
            variant = dataclasses.replace(naive, caps=naive.caps.without(*off),
                                          factory_kwargs=target.factory_kwargs)
    _cache.clear()
    _cache[id(target)] = (target, variant)
    return variant

def of_type(allocator_type: str) -> Target:
    """The selected target built as ``allocator_type`` (itself when it is that type already):
    what an xfails entry found with that type replays against. Raises ``TargetError``."""
    target = current_target()
    if allocator_type == target.allocator_type:
        return target
    variant = naive_variant() if allocator_type == "naive" else load_target(
        target.spec, allocator_type=allocator_type)
    if isinstance(variant, str):
        raise TargetError(variant)
    return variant


#: The naive variants run ``1 / NAIVE_SHARE`` of the profile's examples (a
#: half, not a quarter: at 40 examples a quarter reached the naive allocator's shared swaps
#: and lookahead counts only by luck; about 4 s more CPU under the ci profile).
NAIVE_SHARE = 2


class NaiveVariantTest:
    """Mixin for a machine's ``TestCase`` run against :func:`naive_variant`: skipped with the
    reason when there is none, and with ``1 / NAIVE_SHARE`` of the profile's examples (a naive
    allocator caches nothing, so it has far fewer states)."""

    settings: hypothesis.settings  # the profile's, from the machine's TestCase

    def setUp(self) -> None:
        why = naive_variant()
        if isinstance(why, str):
            raise unittest.SkipTest(why)
        base = self.settings
        self.settings = hypothesis.settings(
            base, max_examples=max(1, base.max_examples // NAIVE_SHARE))
