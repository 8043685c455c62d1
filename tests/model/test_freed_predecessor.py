"""A block freed while its successor lives, then a swap of the successor (formerly
MODEL_ISSUES.md point 1): out of contract, so no target is blamed for what the API specifies
there (the freed predecessor's object is pooled and may come back as another block, or as the
swapped-in block itself)."""

from __future__ import annotations

import pytest

from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.contract import misuse_or_out
from models.families.v0.operations import Dev, Op
from models.families.v0.oracle import Oracle, OutOfContract
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0 import upstream
from properties.families.v0.runner import Runner

CHAIN = ops.AllocateImmutableChain(None, ((1, 1), (2, 2)))
OUT, IN = ops.Swap((1,), Dev.GPU, Dev.CPU), ops.Swap((1,), Dev.CPU, Dev.GPU)
#: Without and with a later allocation that recycles the freed predecessor's object.
PROGRAMS = {
    "freed": [CHAIN, ops.Free(0)],
    "recycled": [CHAIN, ops.Free(0), ops.AllocateImmutable(None, (3, 3))],
}


def _oracle_after(program: list[Op]) -> Oracle:
    target = load_target(DEFAULT_SPEC)
    config = Config(2, 4, 2, target.caps)
    runner, oracle = Runner(target, config), Oracle(config)
    oracle.initial_check(runner.snapshot())
    for op in program:
        outcome, snapshot = runner.execute(op)
        oracle.step(op, outcome, snapshot)
    return oracle


@pytest.mark.parametrize("form", list(PROGRAMS))
def test_swapping_a_successor_of_a_freed_block_is_out_of_contract(form: str) -> None:
    oracle = _oracle_after(PROGRAMS[form])
    with pytest.raises(OutOfContract, match="freed while block 1 lived"):
        misuse_or_out(oracle.model, OUT)


@pytest.mark.parametrize("form", list(PROGRAMS))
def test_a_swap_by_hand_of_a_successor_of_a_freed_block_is_out_of_contract(form: str) -> None:
    """``swap_out`` then ``swap_in`` on the device allocators re-allocates the block under its
    ``prev_block`` just as ``swap`` does (vLLM 0.8 then refused a swap that fits: FREE)."""
    oracle = _oracle_after(PROGRAMS[form])
    with pytest.raises(OutOfContract, match="freed while block 1 lived"):
        misuse_or_out(oracle.model, ops.DeviceSwap((1,), Dev.GPU, Dev.CPU))


def test_a_live_chain_and_a_chain_freed_whole_stay_in_contract() -> None:
    oracle = _oracle_after([CHAIN])
    assert misuse_or_out(oracle.model, ops.Swap((0, 1), Dev.GPU, Dev.CPU)) is None
    assert misuse_or_out(oracle.model, ops.DeviceSwap((0, 1), Dev.GPU, Dev.CPU)) is None
    assert misuse_or_out(oracle.model, OUT) is None  # its predecessor is live
    oracle = _oracle_after([CHAIN, ops.Free(1), ops.Free(0), ops.AllocateImmutableChain(
        None, ((1, 1), (2, 2)))])
    assert misuse_or_out(oracle.model, ops.Swap((3,), Dev.GPU, Dev.CPU)) is None


@pytest.mark.parametrize("form", list(PROGRAMS))
@pytest.mark.parametrize("spec", ["properties.upstream:vllm_v0_allocator",
                                  "properties.upstream:aphrodite_allocator"])
def test_upstream_is_not_blamed(spec: str, form: str) -> None:
    """vLLM 0.8 and Aphrodite crash on the swap-in (an assertion; a RecursionError when the
    pool hands the predecessor's object back as the new block): the oracle raises
    OutOfContract at the swap-out, not a violation."""
    load = upstream.load_aphrodite if "aphrodite" in spec else upstream.load_vllm_v0
    try:
        load()
    except upstream.UpstreamSourceMissing as exc:
        pytest.skip(f"upstream wheel not cached: {exc}")
    target = load_target(spec)
    config = Config(2, 4, 2, target.caps)
    runner, oracle = Runner(target, config), Oracle(config)
    oracle.initial_check(runner.snapshot())
    with pytest.raises(OutOfContract):
        for op in [*PROGRAMS[form], OUT, IN]:
            outcome, snapshot = runner.execute(op)
            oracle.step(op, outcome, snapshot)
