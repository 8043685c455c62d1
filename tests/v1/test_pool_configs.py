"""The bundled v1 pool under fixed configurations and pool layouts: caching off in every
example (the default machine draws it in one in eight), and a second pool whose blocks reach
this one (no vLLM wheel needed)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from models.families.v1 import ops
from models.families.v1.invariants import Family
from models.families.v1.pool_model import PoolConfig
from properties.core.determinism import fixed_constants
from properties.families.v1.executor import run_program
from properties.families.v1.machine import MISUSE_KINDS, bind
from tests.zoo.v1.bundled import VARIANTS
from tests.zoo.v1.bundled_copy import bundled_pool, patched_bundled_pool

CONFIG = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2, 6))


def test_caching_off_machine_passes() -> None:
    """With ``enable_caching=False`` every released block goes to the head; no rule keys."""
    config = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2, 6), caching=False)
    with fixed_constants():
        run_state_machine_as_test(bind(bundled_pool(), config), settings=settings(
            max_examples=60, stateful_step_count=40, derandomize=True, database=None,
            deadline=None, suppress_health_check=list(HealthCheck)))


def test_caching_off_frees_keyless_and_keyed_alike() -> None:
    config = PoolConfig(num_blocks=5, hash_block_size=2, group_block_sizes=(2,), caching=False)
    ex = run_program(bundled_pool(), config, [ops.GetNew(2), ops.Free((1, 2)), ops.Unpin(())])
    assert ex.model.free[:2] == [1, 2]


@pytest.mark.parametrize("kind", MISUSE_KINDS)
def test_every_misuse_probe_is_refused_without_change(kind: str) -> None:
    """The bundled pool claims typed errors and atomicity: every probe, in a state where each
    has something to misuse (keyed, held and free blocks), finds nothing."""
    program = [ops.Req(tokens=(1, 2, 3, 4, 5, 6)), ops.GetNew(3),
               ops.CacheFull(0, (1, 2, 3), 0, 3, 0)]
    ex = run_program(bundled_pool(), CONFIG, program)
    for arg in range(3):
        assert ex.probe(kind, arg) is None


def test_a_pool_touching_foreign_blocks_is_caught() -> None:
    variant = next(v for v in VARIANTS if v.name == "touch_accepts_foreign")
    ex = run_program(patched_bundled_pool(variant.name, variant.patches), CONFIG, [ops.GetNew(1)])
    with pytest.raises(Violation) as info:
        ex.probe("touch_foreign", 0)
    assert info.value.family is Family.CRASH
