"""The direct hash-quality check (``properties.families.v0.hash_quality``): a strong key passes, and
weak keys that no state-machine example reaches are reported as HASH, each by the part of the search
that exists for it: a near-miss pair (Python's tuple ``hash``), the birthday search (a 16-bit key),
the range (a key too narrow to be collision resistant, yet without a collision in
reach)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from fuzz.families.v0.weak_hash import weak_hash
from models.core.invariants import Violation
from models.families.v0.invariants import Family
from prefixcache.hashing import default_hash_function
from properties.core.replay import run_program
from properties.core.targets import DEFAULT_SPEC, Target, load_target
from properties.families.v0 import hash_quality
from properties.families.v0.hash_quality import Collision, near_misses, spread_bits

ZOO_16_BITS = "tests.zoo.v0.broken:key_truncated_16_bits"


def _with_hash(bits: int | None = None, function: object = None) -> Target:
    def truncated(first: bool, prev: int | None, tokens: Sequence[int],
                  extra: int | None = None) -> int:
        return default_hash_function(first, prev, tokens, extra) & ((1 << (bits or 0)) - 1)

    hash_function = truncated if function is None else function
    return replace(load_target(DEFAULT_SPEC), factory_kwargs=(("hash_function", hash_function),))


def test_the_bundled_key_passes() -> None:
    assert hash_quality.search(load_target(DEFAULT_SPEC)) is None
    hash_quality.check(load_target(DEFAULT_SPEC))


def test_python_tuple_hash_is_caught_by_a_near_miss_pair() -> None:
    found = hash_quality.search(_with_hash(function=weak_hash))
    assert isinstance(found, Collision) and found.where.startswith("near misses")
    assert {found.first[1][0], found.second[1][0]} == {-1, -2}


def test_a_16_bit_key_is_caught_as_hash_with_a_replayable_program() -> None:
    target = load_target(ZOO_16_BITS)
    with pytest.raises(Violation) as info:
        hash_quality.check(target)
    violation = info.value
    assert violation.family is Family.HASH, str(violation)
    config, program = violation.prefixcache_program  # type: ignore[attr-defined]
    assert len(program) == 2
    with pytest.raises(Violation) as replayed:
        run_program(target, config, program)
    assert replayed.value.family is Family.HASH and replayed.value.step == 1


def test_a_narrow_key_without_a_collision_in_reach_is_reported_by_its_range(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hash_quality, "BIRTHDAY_CAP", 4096)
    found = hash_quality.search(_with_hash(bits=44))
    assert isinstance(found, Violation) and found.family is Family.HASH
    assert found.observed == 44 and "span 44 bits" in found.message


def test_a_key_of_the_minimum_width_passes_the_range() -> None:
    assert hash_quality.search(_with_hash(bits=hash_quality.MIN_BITS + 8)) is None


def test_near_misses_differ_from_their_base_and_spread_counts_bits() -> None:
    for base in ((-1, 5, 6, 7), (3, 3, 4, 5), (0, 1, 2, 3)):
        variants = [v for _, v in near_misses(base)]
        assert variants and base not in variants
    assert (-2, 5, 6, 7) in [v for _, v in near_misses((-1, 5, 6, 7))]
    assert spread_bits([0, 255, None]) == 8 and spread_bits([7]) == 0
