"""The false-alarm zoo: correct-but-different allocators must pass the conformance machines.

Each variant of :data:`tests.zoo.v0.correct_variants.VARIANTS` and
:data:`tests.zoo.v1.correct_variants.VARIANTS` is the bundled reference with one small patch
that takes a choice the contract leaves open another way. Two tests per variant:

- it passes the same state machines the mutant zoo uses (``tests.zoo.harness``; v1: the
  block-level machine of ``tests/v1/test_bundled_zoo.py``) under a fixed, seeded budget: a
  violation is a false alarm of the suite;
- a short program's observable results differ from the bundled allocator's, so the variant
  really takes the other choice (it is not the bundled allocator in disguise).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from models.families.v1.pool_model import PoolConfig
from properties.core.determinism import fixed_constants
from properties.core.replay import run_program
from properties.core.targets import load_target
from properties.families.v0.adapter import FamilyAdapter
from properties.families.v1.machine import FINDINGS, bind
from tests.zoo.harness import Budget, first_failure
from tests.zoo.patching import package
from tests.zoo.v0 import correct_variants as v0
from tests.zoo.v1 import correct_variants as v1
from tests.zoo.v1.bundled_copy import patched_bundled_pool

#: One seeded schedule, smaller than the mutant zoo's (these targets must pass, so every
#: example runs to the end), run in this process: about 1.5 s of CPU per machine.
BUDGET = Budget(max_examples=30, steps=30, seed=0)


# --------------------------------------------------------------------------- v0: passing


@pytest.mark.parametrize(("name", "check"), [(v.name, c) for v in v0.VARIANTS for c in v.checks])
def test_v0_variant_passes(name: str, check: str, restore_target: None) -> None:
    target = load_target(v0.BY_NAME[name].spec)
    found = first_failure(check, target, BUDGET)
    if found is not None:
        config, program = found
        with pytest.raises(Violation) as violation:
            run_program(target, config, program)
        pytest.fail(f"false alarm on the correct variant {name} ({v0.BY_NAME[name].choice}), "
                    f"{check} machine, on {config}:\n{violation.value}")


# --------------------------------------------------------------------------- v0: different


def _create(name: str | None, gpu: int = 4, block_size: int = 2) -> tuple[Any, Any]:
    """A prefix-caching allocator (the bundled one for ``None``) and its ``Device`` enum."""
    if name is None:
        from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
        alloc = CpuGpuBlockAllocator.create("prefix_caching", gpu, 0, block_size)
    else:
        alloc = getattr(v0, name)("prefix_caching", gpu, 0, block_size)
    return alloc, FamilyAdapter(alloc, block_size).device_enum


def _first_fresh_id(name: str | None) -> object:
    alloc, dev = _create(name)
    return alloc.allocate_mutable_block(None, device=dev.GPU).block_id


def _freed_id_reused(name: str | None) -> object:
    alloc, dev = _create(name)
    first = alloc.allocate_mutable_block(None, device=dev.GPU)
    alloc.allocate_mutable_block(None, device=dev.GPU)
    alloc.free(first)
    return alloc.allocate_mutable_block(None, device=dev.GPU).block_id


def _id_after_reset(name: str | None) -> object:
    alloc, dev = _create(name)
    alloc.free(alloc.allocate_immutable_block(None, [1, 2], device=dev.GPU))
    assert alloc.reset_prefix_cache() is True
    return alloc.allocate_mutable_block(None, device=dev.GPU).block_id


def _full_tie_victim(name: str | None) -> object:
    """Two evictable ids, same access time, same depth; a third allocation evicts one."""
    alloc, dev = _create(name, gpu=2, block_size=1)
    first = alloc.allocate_immutable_block(None, [1], device=dev.GPU)
    second = alloc.allocate_immutable_block(None, [2], device=dev.GPU)
    ids = (first.block_id, second.block_id)
    alloc.free(first)
    alloc.free(second)
    return ids, alloc.allocate_mutable_block(None, device=dev.GPU).block_id


def _evictor_readd(name: str | None) -> object:
    module = package(name).evictor if name is not None else __import__(
        "prefixcache.evictor", fromlist=["LRUEvictor"])
    evictor = module.LRUEvictor()
    evictor.add(0, 11, 1, 0.0)
    try:
        evictor.add(0, 12, 2, 0.0)
    except ValueError as refused:
        return type(refused).__name__, evictor.evict()
    return "overwritten", evictor.evict()


def _content_hash(name: str | None) -> object:
    alloc, dev = _create(name)
    return alloc.allocate_immutable_block(None, [1, 2], device=dev.GPU).content_hash


def _overflow_error(name: str | None) -> object:
    alloc, dev = _create(name)
    block = alloc.allocate_mutable_block(None, device=dev.GPU)
    with pytest.raises(ValueError) as refused:
        block.append_token_ids([1, 2, 3])
    return type(refused.value).__name__, block.token_ids


#: variant -> (observation, the bundled allocator's result, the variant's)
V0_DIFFERENCES: dict[str, tuple[Callable[[str | None], object], object, object]] = {
    "fresh_id_from_back": (_first_fresh_id, 0, 3),
    "freed_id_to_back": (_freed_id_reused, 0, 2),
    "reset_ids_to_back": (_id_after_reset, 0, 1),
    "evictor_full_ties_newest_first": (_full_tie_victim, ((0, 1), 0), ((0, 1), 1)),
    "evictor_readd_overwrites": (_evictor_readd, ("InvalidArgumentError", (0, 11)),
                                 ("overwritten", (0, 12))),
    "block_hash_sha256": (_content_hash, None, None),  # differ: compared below
    "overflow_refused_as_invalid_argument": (_overflow_error, ("BlockFullError", []),
                                             ("InvalidArgumentError", [])),
}


def test_every_v0_variant_has_a_difference() -> None:
    assert set(V0_DIFFERENCES) == set(v0.BY_NAME)


@pytest.mark.parametrize("name", list(V0_DIFFERENCES))
def test_v0_variant_differs_observably(name: str) -> None:
    observe, bundled, variant = V0_DIFFERENCES[name]
    got_bundled, got_variant = observe(None), observe(name)
    assert got_bundled != got_variant, f"{name} behaves like the bundled allocator here"
    if bundled is not None:
        assert (got_bundled, got_variant) == (bundled, variant)
    else:  # a hash value: both 128-bit ints, deterministic
        assert isinstance(got_variant, int) and 0 <= got_variant < 1 << 128
        assert observe(name) == got_variant and observe(None) == got_bundled


# --------------------------------------------------------------------------- v1


V1_SETTINGS = settings(stateful_step_count=50, derandomize=True, database=None, deadline=None,
                       suppress_health_check=list(HealthCheck),
                       phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False,
                       max_examples=60)
#: The v1 zoo's configuration (tests/v1/test_bundled_zoo.py): two groups, events on.
V1_CONFIG = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2, 6), events=True)


@pytest.mark.parametrize("variant", v1.VARIANTS, ids=[v.name for v in v1.VARIANTS])
def test_v1_variant_passes(variant: v1.Variant) -> None:
    target = patched_bundled_pool(variant.name, variant.patches)
    FINDINGS.clear()
    with fixed_constants():
        run_state_machine_as_test(bind(target, V1_CONFIG), settings=V1_SETTINGS)
    assert not [k for k in FINDINGS if k[0] == target.name], FINDINGS


@pytest.mark.parametrize("variant", v1.VARIANTS, ids=[v.name for v in v1.VARIANTS])
def test_v1_variant_differs_observably(variant: v1.Variant) -> None:
    bundled, patched = v1.observe(None, variant), v1.observe(variant, variant)
    assert bundled != patched, f"{variant.name} behaves like the bundled pool here"
    assert (bundled, patched) == variant.difference

