"""The v1 block-level machine catches every broken bundled pool with its family.

Each variant of :data:`tests.zoo.v1.bundled.VARIANTS` is the bundled pool with one patch. The
machine runs derandomized (no Hypothesis shrinking); the failing program is then shrunk here by
dropping operations while the same family still fails, and a catch counts only when the shrunk
program replays cleanly on the unpatched bundled pool. A misuse probe's violation (typed errors,
atomicity) is replayed as the program followed by the same probe. No vLLM wheel is needed.
``PREFIXCACHE_V1_ZOO_REPORT`` names a file to which each variant's seconds to catch and shrunk
program length are appended (JSON lines).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Invariant, Violation
from models.families.v1 import ops
from models.families.v1.pool_model import PoolConfig
from properties.core.determinism import fixed_constants
from properties.families.v1.executor import run_program
from properties.families.v1.machine import FINDINGS, bind
from properties.families.v1.targets import PoolTarget
from tests.zoo.patching import Patch, PatchError
from tests.zoo.v1.bundled import VARIANTS, Variant
from tests.zoo.v1.bundled_copy import bundled_pool, patched_bundled_pool
from tests.zoo.v1.catching import catch

SETTINGS = settings(stateful_step_count=50, derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck),
                    phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False)
CONFIG = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2, 6), events=True)
_PROBE = re.compile(r"^misuse (\w+) \(arg (\d+)\)")


def _fails(target: PoolTarget, program: Sequence[ops.Op], family: Invariant,
           probe: tuple[str, int] | None, config: PoolConfig = CONFIG) -> bool:
    """Whether ``program`` (then ``probe``) fails on ``target`` with ``family``."""
    try:
        ex = run_program(target, config, program)
        if probe is not None:
            ex.probe(*probe)
    except Violation as v:
        return v.family is family
    except Exception:  # an invalid candidate (a dropped request another op names)
        return False
    return False


def _valid(program: Sequence[ops.Op], probe: tuple[str, int] | None,
           config: PoolConfig = CONFIG) -> bool:
    """Whether ``program`` (then ``probe``) passes on the unpatched pool: a candidate that
    fails there (a free of blocks nobody holds, say) is misuse, not the variant's bug."""
    try:
        ex = run_program(bundled_pool(), config, program)
        return probe is None or ex.probe(*probe) is None
    except Exception:
        return False


def shrink(target: PoolTarget, program: list[ops.Op], family: Invariant,
           probe: tuple[str, int] | None, config: PoolConfig = CONFIG) -> list[ops.Op]:
    """Greedy chunk deletion (halving chunk sizes) keeping the failure's family."""
    size = max(1, len(program) // 2)
    while True:
        i = 0
        while i < len(program):
            candidate = program[:i] + program[i + size:]
            if (_fails(target, candidate, family, probe, config)
                    and _valid(candidate, probe, config)):
                program = candidate
            else:
                i += size
        if size == 1:
            return program
        size //= 2


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_variant_is_caught(variant: Variant) -> None:
    target = patched_bundled_pool(variant.name, variant.patches)
    config = replace(CONFIG, lookahead=variant.lookahead, caching=variant.caching)
    machine = bind(target, config)
    v, program, elapsed = catch(machine, settings(SETTINGS, max_examples=variant.examples),
                                target.name)
    assert v.family in (variant.family, *variant.also), str(v)
    found = _PROBE.match(v.message)
    probe = None if found is None else (found[1], int(found[2]))
    if probe is None:
        program = program[:v.step + 1] if v.step is not None else program
    assert _fails(target, program, v.family, probe, config), "the failure does not replay"
    program = shrink(target, program, v.family, probe, config)
    clean = run_program(bundled_pool(), config, program)  # raises on a baseline deviation
    if probe is not None:
        assert clean.probe(*probe) is None
    report = os.environ.get("PREFIXCACHE_V1_ZOO_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as out:
            out.write(json.dumps({"variant": variant.name, "family": v.family.value,
                                  "seconds": round(elapsed, 3), "steps": len(program)}) + "\n")


def test_unpatched_bundled_pool_passes_the_same_budget() -> None:
    """The baseline itself: the same machine and budget find nothing on the bundled pool."""
    with fixed_constants():
        run_state_machine_as_test(bind(bundled_pool(), CONFIG),
                                  settings=settings(SETTINGS, max_examples=100))
    assert not [k for k in FINDINGS if k[0] == "prefixcache"], FINDINGS


def test_stale_patch_fails_loudly() -> None:
    with pytest.raises(PatchError, match="occurs 0 times"):
        patched_bundled_pool("stale_patch", (Patch("v1.core.block_pool", "BlockPool.touch",
                                                   "no such text", "x"),))
