"""Device-level calls (``DEVICE_OPS``, ``models.families.v0.ops.device``): one device's own
allocator called directly, judged by the model against the bundled allocator, vLLM 0.8 and the zoo
mutants that break one rule each."""

from __future__ import annotations

from functools import partial

import pytest

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, ErrorKind, Op
from models.families.v0.oracle import OutOfContract
from properties.core.targets import DEFAULT_SPEC
from tests.model.judged import run_judged

F = Family
VLLM = "properties.upstream:vllm_v0_allocator"


#: ``run_judged`` on this module's default pool shape.
_run = partial(run_judged, shape=(2, 4, 2))


def _zoo(name: str) -> str:
    return f"tests.zoo.v0.broken:{name}"


#: A cached chain of two full blocks (handles 0, 1; ids 0, 1) and a partial block after it
#: (handle 2, id 2), all on the GPU (block size 2, 4 GPU ids, 2 CPU ids 4 and 5).
CHAIN: list[Op] = [ops.AllocateImmutableChain(None, ((1, 2), (3, 4))), ops.AllocateMutable(1),
                   ops.Append(2, (5,))]


# --------------------------------------------------------------------------- valid swaps


@pytest.mark.parametrize(("spec", "allocator_type"), [
    (DEFAULT_SPEC, "prefix_caching"), (DEFAULT_SPEC, "naive"), (VLLM, "naive")])
def test_a_swap_by_hand_matches_the_swap(spec: str, allocator_type: str) -> None:
    """Out to the CPU and back: new ids per block, the swap log untouched, the cached block
    found again on the GPU. (vLLM's prefix-caching swap-in counts queries: below.)"""
    program = [*CHAIN, ops.DeviceSwap((1, 2), Dev.GPU, Dev.CPU), ops.SwapLog(),
               ops.DeviceSwap((1, 2), Dev.CPU, Dev.GPU)]
    out, oracle = _run(program, spec, allocator_type=allocator_type)
    assert out[3] == (None, {"pairs": [[1, 4], [2, 5]], "swapped": True})
    assert out[4] == (None, [])
    assert out[5][1]["swapped"] is True
    assert [oracle.model.blocks[h].device for h in (0, 1, 2)] == [Dev.GPU] * 3


@pytest.mark.parametrize("allocator_type", ["prefix_caching", "naive"])
def test_a_swap_by_hand_is_no_cache_query(allocator_type: str) -> None:
    """The chain's two admissions are the only queries (two misses): the swap-in that finds
    the cached block again on the GPU counts no hit."""
    program = [*CHAIN, ops.DeviceSwap((1, 2), Dev.GPU, Dev.CPU),
               ops.DeviceSwap((1, 2), Dev.CPU, Dev.GPU), ops.HitRate(Dev.GPU)]
    out, _ = _run(program, allocator_type=allocator_type)
    assert out[-1] == (None, 0.0 if allocator_type == "prefix_caching" else -1.0)


def test_vllm_counts_a_swap_in_as_cache_queries() -> None:
    """vLLM 0.8's swap-in re-allocates by content and counts the hit (xfails
    ``swap-in-counts-hits``): HIT."""
    program = [*CHAIN, ops.DeviceSwap((1, 2), Dev.GPU, Dev.CPU),
               ops.DeviceSwap((1, 2), Dev.CPU, Dev.GPU), ops.HitRate(Dev.GPU)]
    with pytest.raises(Violation) as err:
        _run(program, VLLM)
    assert err.value.family is F.HIT


@pytest.mark.parametrize("allocator_type", ["prefix_caching", "naive"])
def test_a_swap_that_does_not_fit_is_refused_and_put_back(allocator_type: str) -> None:
    """Three blocks, two CPU ids: the swap-in takes nothing and the blocks are held on the
    GPU again, under their old ids."""
    out, oracle = _run([*CHAIN, ops.DeviceSwap((0, 1, 2), Dev.GPU, Dev.CPU)],
                       allocator_type=allocator_type)
    assert out[-1] == (None, {"pairs": [[0, 0], [1, 1], [2, 2]], "swapped": False})
    assert oracle.model.pools[Dev.CPU].free == 2
    assert oracle.free_count(Dev.GPU) == 1


def test_a_refused_swap_of_a_shared_id_is_out_of_contract() -> None:
    """Its swap-out frees no id, so the swapper might find none to put it back."""
    program = [ops.AllocateMutable(None, Dev.CPU), ops.Fork(0),
               ops.AllocateMutable(None), ops.AllocateMutable(None),
               ops.DeviceSwap((0,), Dev.CPU, Dev.GPU)]
    with pytest.raises(OutOfContract, match="shared id"):
        _run(program, shape=(1, 2, 1))


def test_vllm_is_not_asked_a_swap_that_does_not_fit() -> None:
    """docs/API.md §4.5 lets upstream's swap-in stop midway: out of contract without atomicity."""
    with pytest.raises(OutOfContract, match="midway"):
        _run([*CHAIN, ops.DeviceSwap((0, 1, 2), Dev.GPU, Dev.CPU)], VLLM)


def test_a_swap_in_that_fails_midway_is_caught() -> None:
    """The mutant takes the CPU's two ids for the first blocks before it runs out."""
    with pytest.raises(Violation) as found:
        _run([*CHAIN, ops.DeviceSwap((0, 1, 2), Dev.GPU, Dev.CPU)],
             _zoo("swap_in_fails_midway"))
    assert found.value.family is F.ATOMIC


def test_a_swap_by_hand_of_another_devices_block_is_out_of_contract() -> None:
    with pytest.raises(OutOfContract, match="not on cpu"):
        _run([*CHAIN, ops.DeviceSwap((0,), Dev.CPU, Dev.GPU)])


# --------------------------------------------------------------------------- release by id


@pytest.mark.parametrize("spec", [DEFAULT_SPEC, VLLM])
def test_free_block_id_releases_one_reference(spec: str) -> None:
    """A forked block released by id: the id stays held by the fork; released again through
    the fork, it is the next id handed out (the left of the free deque)."""
    program = [ops.AllocateMutable(None), ops.Fork(0), ops.DeviceFreeId(0, Dev.GPU),
               ops.DeviceFreeId(1, Dev.GPU), ops.AllocateMutable(None)]
    _, oracle = _run(program, spec, allocator_type="naive")
    assert oracle.model.blocks[2].id == 0
    assert not oracle.model.blocks[0].live


def test_free_block_id_is_the_naive_allocators() -> None:
    _, oracle = _run([ops.AllocateMutable(None)])
    assert "naive" in str(oracle.contract_error(ops.DeviceFreeId(0, Dev.GPU)))


# --------------------------------------------------------------------------- misuse

MISUSES: list[Op] = [
    ops.DeviceSwapMisuse("swap_in_held", (0, 1), Dev.GPU),
    ops.DeviceSwapMisuse("swap_in_held", (2,), Dev.CPU),
    ops.DeviceSwapMisuse("swap_out_foreign", (0,), Dev.CPU),
    ops.DeviceSwapMisuse("free_foreign", (2,), Dev.CPU),
    ops.DeviceMisuse("device_argument", Dev.GPU),
    ops.DeviceMisuse("device_argument", Dev.CPU),
    ops.DeviceMisuse("physical_unknown", Dev.GPU, 4),
    ops.DeviceMisuse("physical_unknown", Dev.CPU, 6),
    ops.DeviceMisuse("refcount_unknown", Dev.GPU, 6),
    ops.DeviceMisuse("device_unknown", Dev.GPU, -1),
    ops.DeviceMisuse("free_foreign_allocator"),
    ops.DeviceMisuse("swap_in_oversized", Dev.CPU),
]


@pytest.mark.parametrize("misuse", MISUSES, ids=lambda op: f"{op.action}-{op.device.value}")
@pytest.mark.parametrize("allocator_type", ["prefix_caching", "naive"])
def test_device_misuse_is_refused_and_changes_nothing(misuse: Op, allocator_type: str) -> None:
    out, _ = _run([*CHAIN, misuse, ops.HitRate(Dev.CPU)], allocator_type=allocator_type)
    assert out[3][0] is ErrorKind.MISUSE


def test_free_block_id_of_a_free_id_is_refused() -> None:
    out, _ = _run([ops.AllocateMutable(None), ops.DeviceMisuse("free_id_twice", Dev.GPU, 1)],
                  allocator_type="naive")
    assert out[-1][0] is ErrorKind.MISUSE


@pytest.mark.parametrize("op", [ops.DeviceMisuse("physical_unknown", Dev.GPU, 1),
                                ops.DeviceMisuse("refcount_unknown", Dev.GPU, 3),
                                ops.DeviceMisuse("free_id_twice", Dev.GPU, 0),
                                ops.DeviceSwapMisuse("swap_out_foreign", (0,), Dev.GPU),
                                ops.DeviceMisuse("no_such_call")])
def test_calls_that_are_not_misuse_are_out_of_contract(op: Op) -> None:
    _, oracle = _run([ops.AllocateMutable(None)], allocator_type="naive")
    assert oracle.contract_error(op) is not None


def test_vllm_is_not_fed_device_misuse() -> None:
    with pytest.raises(OutOfContract, match="without typed errors"):
        _run([*CHAIN, ops.DeviceSwapMisuse("swap_in_held", (0,), Dev.CPU)], VLLM)


def test_a_swap_in_that_takes_held_blocks_is_caught() -> None:
    with pytest.raises(Violation) as found:
        _run([*CHAIN, ops.DeviceSwapMisuse("swap_in_held", (2,), Dev.CPU)],
             _zoo("swap_in_takes_held_blocks"))
    assert found.value.family is F.SWAP


def test_device_calls_round_trip_through_json() -> None:
    for op in [ops.DeviceSwap((1, 2), Dev.GPU, Dev.CPU), ops.DeviceFreeId(3, Dev.CPU), *MISUSES]:
        assert ops.op_from_json(ops.op_to_json(op)) == op
