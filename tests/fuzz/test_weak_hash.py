"""Collisions are caught by the content checks, not avoided by luck: with a deliberately weak
hash injected into the bundled allocator the block-level machine, fuzzed, finds a HASH or
CONTENT violation, and the very same inputs pass with the default hash."""

from __future__ import annotations

import pytest

from fuzz.core.engine import Engine
from fuzz.core.machine_harness import harness_for
from fuzz.families.v0.weak_hash import weak_hash
from models.families.v0.invariants import Family
from prefixcache.hashing import default_hash_function
from properties.core import selection
from properties.core.targets import Target

MERSENNE_61 = 2**61 - 1


def test_weak_hash_collides_where_the_default_does_not() -> None:
    pairs = [
        ((True, None, [-1], None), (True, None, [-2], None)),
        ((True, None, [1], None), (True, None, [1 + MERSENNE_61], None)),
        ((True, None, [5], None), (True, None, [5], 0)),
        ((False, 7, [3], None), (False, 7 + MERSENNE_61, [3], None)),
    ]
    for a, b in pairs:
        assert weak_hash(*a) == weak_hash(*b)
        assert default_hash_function(*a) != default_hash_function(*b)


def test_weak_hash_is_found_and_default_hash_passes(bundled: Target) -> None:
    with selection.kept():
        weak = harness_for("block_level", family="v0", weak_hash=True)
        assert weak.target.factory_kwargs  # the weak hash is injected
        engine = Engine(weak.run, weak.seeds(0), seed=0)
        stats = engine.fuzz(max_execs=300, stop_on_failure=True)
        assert stats.failures, "the weak hash went unnoticed"
        failure = stats.failures[0]
        assert failure.result.violation is not None
        assert failure.result.violation.family in (Family.HASH, Family.CONTENT)

        strong = harness_for("block_level", family="v0", weak_hash=False).bind(bundled)
        for data in [failure.data, *list(engine.seen_inputs)[:20]]:
            result = strong.run(data)
            assert result.violation is None, str(result.violation)


def test_a_machine_without_a_weak_hash_mode_is_refused() -> None:
    with selection.kept(), pytest.raises(ValueError, match="no weak-hash mode"):
        harness_for("evictor_level", family="v0", weak_hash=True).target  # noqa: B018
