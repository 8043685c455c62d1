"""The v1 block-level fuzz harness: clean on the bundled pool, and it finds broken ones.

Seeded inputs (``random.Random``) decode into v1 programs judged by the v1 executor; the core
engine, run over the harness against every patched bundled pool of :mod:`tests.zoo.v1.bundled`,
must reach the variant's failure, in its family, within a small execution budget (the most any
variant needed when written: 399 executions; about 2 s for the whole zoo).
"""

from __future__ import annotations

import logging
import random

import pytest

from fuzz.core.engine import Engine
from fuzz.families.v1 import fuzz_pool
from fuzz.families.v1.execution import execute
from properties.families.v1 import targets
from tests.zoo.v1.bundled import VARIANTS, Variant
from tests.zoo.v1.bundled_copy import patched_bundled_pool


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("prefixcache").setLevel(logging.ERROR)
    logging.getLogger("prefixcache_zoo_v1").setLevel(logging.ERROR)


def test_seeded_inputs_run_clean_on_the_bundled_pool() -> None:
    target = targets.load(targets.DEFAULT_SPEC)
    rng = random.Random(0)
    steps = 0
    for _ in range(200):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
        result = execute(data, target)
        assert result.violation is None, (result.violation, data.hex())
        steps += len(result.program)
    assert steps > 200 * 10  # the inputs do decode into programs, not just stop


def test_the_entry_point_accepts_any_bytes() -> None:
    for data in (b"", b"\xff" * 64, bytes(range(256))):
        fuzz_pool.TestOneInput(data)


#: Variants whose bug lies in an operation the fuzz decoder does not draw
#: (``fuzz.families.v1.decoder.UNDRIVEN``, and ``free_blocks``' ``evict_first``): the block
#: machine catches them (``tests/v1/test_bundled_zoo.py``).
UNDRIVEN_VARIANTS = frozenset({"unpin_forgets_reader", "unpin_to_head", "move_keeps_source_key",
                               "emit_cached_announces_miss", "evict_first_ignored"})
FUZZED = [v for v in VARIANTS if v.name not in UNDRIVEN_VARIANTS]


def test_undriven_variants_exist() -> None:
    """The exclusion names real variants (a renamed one would silently rejoin or vanish)."""
    assert {v.name for v in VARIANTS} >= UNDRIVEN_VARIANTS


@pytest.mark.parametrize("variant", FUZZED, ids=[v.name for v in FUZZED])
def test_engine_finds_each_zoo_variant(variant: Variant) -> None:
    target = patched_bundled_pool(variant.name, variant.patches)
    engine = Engine(lambda data: execute(data, target), [b"", bytes(range(64))], seed=0)
    stats = engine.fuzz(max_execs=3000, stop_on_failure=True)
    assert stats.failures, f"{variant.name} not found in {stats.execs} executions"
    violation = stats.failures[0].result.violation
    assert violation is not None, variant.name
    assert violation.family in (variant.family, *variant.also), str(violation)
