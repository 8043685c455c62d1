"""The v1 machine catches every broken pool of the zoo with its family.

A catch counts only when the shrunk program also replays cleanly on the unpatched pool, so a
known upstream deviation can never pass for a caught variant. ``PREFIXCACHE_V1_ZOO_REPORT``
names a file to which each variant's time to catch and program length are appended (shrunk
when ``PREFIXCACHE_V1_ZOO_SHRINK`` is set; the default run stops at the first failure).
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, Phase, settings

from models.families.v1.pool_model import PoolConfig
from properties.families.v1 import upstream
from properties.families.v1.executor import run_program
from properties.families.v1.machine import bind
from properties.families.v1.targets import patched_vllm_pool, vllm_v1_block_pool
from tests.zoo.v1.catching import catch
from tests.zoo.v1.upstream import VARIANTS, Variant

pytestmark = pytest.mark.skipif(upstream.cached_wheel() is None
                                or upstream.cached_wheel("0.33.0") is None,
                                reason=f"vllm 0.34.0 or 0.33.0 wheel not cached: "
                                f"`{upstream.FETCH_COMMAND} --version 0.33.0` (and 0.34.0)")
SHRINK = bool(os.environ.get("PREFIXCACHE_V1_ZOO_SHRINK"))  # for the report: shrunk lengths
SETTINGS = settings(max_examples=600, stateful_step_count=50, derandomize=True, database=None,
                    deadline=None, suppress_health_check=list(HealthCheck),
                    phases=[Phase.explicit, Phase.generate] + [Phase.shrink] * SHRINK,
                    report_multiple_bugs=False)


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_variant_is_caught(variant: Variant) -> None:
    target = patched_vllm_pool(variant.name, variant.patches)
    config = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2, 6),
                        events=variant.events)
    machine = bind(target, config, avoid=variant.avoid)
    # The zoo's findings are its patches', not news about upstream.
    v, program, elapsed = catch(machine, settings(SETTINGS, max_examples=variant.examples),
                                variant.name)
    assert v.family is variant.family, str(v)
    run_program(vllm_v1_block_pool(), config, program)  # clean on the baseline
    report = os.environ.get("PREFIXCACHE_V1_ZOO_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as out:
            out.write(json.dumps({"variant": variant.name, "family": v.family.value,
                                  "seconds": round(elapsed, 2), "steps": len(program)}) + "\n")
