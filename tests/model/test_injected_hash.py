"""The injected hash function (``InjectedHash``, ``models.families.v0.injected_hash``): the bundled
allocator keys both devices' blocks by it (values and hits as the model says, each read-out,
when wrong, flagged with its family), vLLM 0.8's ``create`` takes none (the op is unsupported
there)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from models.core.invariants import Invariant, Violation
from models.families.v0 import operations as ops
from models.families.v0.contract import OutOfContract
from models.families.v0.injected_hash import injected_hash
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev
from properties.families.v0.adapter import Unsupported
from tests.model.judged import run_judged

F = Family
VLLM = "properties.upstream:vllm_v0_allocator"


def _op(tokens: tuple[int, ...] = (5, 7, 9), tail: tuple[int, ...] | None = None
        ) -> ops.InjectedHash:
    return ops.InjectedHash(tokens, tokens[1:] + tokens[:1], tail or (1,) * len(tokens))


def test_function_is_order_blind_and_deterministic() -> None:
    """A permutation collides; the flag, predecessor, extra hash and multiset do not."""
    base = injected_hash(True, None, [5, 7, 9])
    assert base == injected_hash(True, None, [9, 5, 7])
    code = ("from models.families.v0.injected_hash import injected_hash as f; "
            "print(f(True, None, [5, 7, 9]))")
    for seed in ("1", "2"):  # str and None hashing vary per process; the function must not
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env={**os.environ, "PYTHONHASHSEED": seed})
        assert int(out.stdout) == base
    others = {injected_hash(False, base, [5, 7, 9]), injected_hash(True, None, [5, 7, 8]),
              injected_hash(True, None, [5, 7, 9], 3), injected_hash(False, 1, [5, 7, 9])}
    assert base not in others and len(others) == 4
    assert 0 <= injected_hash(True, None, [-1, 2**70]) < 2**64


def test_bundled_allocator_keys_both_devices_by_the_injected_hash() -> None:
    op = _op()
    values, _ = run_judged([op], shape=(3, 2, 2))
    error, value = values[0]
    assert error is None
    first = injected_hash(True, None, op.tokens)
    chained = injected_hash(False, first, op.tail)
    assert value["hashes"] == [[first, first, chained]] * len(Dev)
    assert [len(set(ids)) for ids in value["ids"]] == [1, 1]
    assert value["ids"][0][0] < 4 <= value["ids"][1][0]  # GPU ids first, then CPU's


@pytest.mark.parametrize(("tamper", "family"), [
    ({"hashes": [[1, 1, 1], [1, 1, 1]], "ids": [[0] * 4, [4] * 4]}, F.HASH),
    ({"hashes": None, "ids": []}, F.HASH),
])
def test_wrong_hashes_are_flagged(tamper: object, family: Invariant) -> None:
    with pytest.raises(Violation) as info:
        run_judged([_op((1, 2))], shape=(2, 2, 2), tamper=tamper)
    assert info.value.family is family


def test_a_missed_collision_is_flagged_as_cache() -> None:
    op = _op((1, 2))
    good, _ = run_judged([op], shape=(2, 2, 2))
    tampered = {"hashes": good[0][1]["hashes"], "ids": [[0, 1, 0, 0], [4, 4, 4, 4]]}
    with pytest.raises(Violation) as info:
        run_judged([op], shape=(2, 2, 2), tamper=tampered)
    assert info.value.family is F.CACHE


@pytest.mark.parametrize("op", [
    ops.InjectedHash((1, 2), (1, 3), (0, 0)),  # not a permutation
    ops.InjectedHash((1, 2, 3), (2, 3, 1), (0, 0, 0)),  # not one block of size 2
])
def test_out_of_contract(op: ops.InjectedHash) -> None:
    with pytest.raises(OutOfContract):
        run_judged([op], shape=(2, 2, 2))


def test_vllm_create_takes_no_hash_function() -> None:
    with pytest.raises(Unsupported):
        run_judged([_op((1, 2))], spec=VLLM, shape=(2, 2, 2))


def test_json_round_trip() -> None:
    op = _op()
    assert ops.op_from_json(ops.op_to_json(op)) == op

