"""Collisions are caught by the content checks, not avoided by luck: with a deliberately weak
hash injected into the bundled allocator the hashing harness finds a HASH or CONTENT
violation, and the very same inputs pass with the default hash."""

from __future__ import annotations

from fuzz.cli import corpus_dir, read_corpus
from fuzz.core.engine import Engine
from fuzz.core.harness import Harness, harness_for
from fuzz.families.v0.decoder import Level
from fuzz.families.v0.weak_hash import weak_hash
from models.families.v0.invariants import Family
from prefixcache.hashing import default_hash_function
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
    weak = harness_for("hashing", weak_hash=True)
    engine = Engine(weak.run, read_corpus(corpus_dir("hashing")), seed=0)
    stats = engine.fuzz(max_execs=1500, stop_on_failure=True)
    assert stats.failures, "the weak hash went unnoticed"
    failure = stats.failures[0]
    assert failure.result.violation is not None
    assert failure.result.violation.family in (Family.HASH, Family.CONTENT)

    strong = Harness(Level.HASHING).bind(bundled)
    assert strong.run(failure.data).violation is None
    for data in list(engine.seen_inputs)[:300]:
        result = strong.run(data)
        assert result.violation is None, str(result.violation)
        assert result.stopped is None
