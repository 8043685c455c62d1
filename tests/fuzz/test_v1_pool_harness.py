"""The v1 fuzz harness (``fuzz/families/v1/fuzz_pool_level.py``): the pool machine driven by fuzz
inputs (:mod:`fuzz.core.machine_harness`), clean on the bundled pool, and it finds broken ones.

Seeded random inputs run as programs of the pool machine (the family's one generator), every
step judged by the v1 executor; the core engine, run over the harness against every patched
bundled pool of :mod:`tests.zoo.v1.bundled`, must reach the variant's failure, in its family,
within :data:`BUDGET` executions (the most any variant needed when measured, seed 0:
1,780, ``key_ignores_lookahead``, which needs the drawn hash lookahead on; the whole zoo about
7,000 executions; before the machine drew caching off, 990 and 5,300 without
``caching_off_frees_to_tail``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator

import pytest

from fuzz.core.engine import Engine
from fuzz.core.machine_harness import MachineHarness
from fuzz.families.v1 import fuzz_pool_level
from properties.core import selection
from properties.families.v1 import targets
from properties.families.v1.family import FAMILY
from tests.zoo.v1.bundled import VARIANTS, Variant
from tests.zoo.v1.bundled_copy import patched_bundled_pool

#: Executions the engine may take per variant (the most measured, 1,780, and some headroom).
BUDGET = 2200


@pytest.fixture(autouse=True)
def _quiet_and_kept() -> Iterator[None]:
    """Quiet pools; the harness selects its target for the machine, the session's selection
    survives."""
    logging.getLogger("prefixcache").setLevel(logging.ERROR)
    logging.getLogger("prefixcache_zoo_v1").setLevel(logging.ERROR)
    with selection.kept():
        yield


def _harness(pool: targets.PoolTarget) -> MachineHarness:
    return MachineHarness(fuzz_pool_level.HARNESS.level, family=FAMILY.name).bind(
        FAMILY.target_of(pool))


def test_the_harness_is_the_pool_machine() -> None:
    assert fuzz_pool_level.HARNESS.name == "pool_level"
    assert fuzz_pool_level.HARNESS.level.machine.__name__ == "PoolLevelMachine"


def test_seeded_inputs_run_clean_on_the_bundled_pool() -> None:
    harness = _harness(targets.load(targets.DEFAULT_SPEC))
    rng = random.Random(0)
    steps = 0
    for _ in range(100):
        data = rng.randbytes(rng.randrange(0, 512))
        result = harness.run(data)
        assert result.violation is None, (result.violation, data.hex())
        steps += len(result.program)
    assert steps > 100 * 8  # the inputs do run programs, not just stop


def test_the_entry_point_accepts_any_bytes() -> None:
    for data in (b"", b"\xff" * 64, bytes(range(256))):
        fuzz_pool_level.TestOneInput(data)


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_engine_finds_each_zoo_variant(variant: Variant) -> None:
    harness = _harness(patched_bundled_pool(variant.name, variant.patches))
    engine = Engine(harness.run, harness.seeds(0), seed=0)
    stats = engine.fuzz(max_execs=BUDGET, stop_on_failure=True)
    assert stats.failures, f"{variant.name} not found in {stats.execs} executions"
    violation = stats.failures[0].result.violation
    assert violation is not None, variant.name
    assert violation.family in (variant.family, *variant.also), str(violation)
