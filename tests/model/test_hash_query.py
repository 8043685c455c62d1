"""The content-hash operations (``models.families.v0.ops.hashing``): ``HashRecompute`` judged
against the model (CACHE when ``content_hash`` is None where it must not be or the reverse,
HASH when it differs from the recomputed hash), its contract, the malformed
``hash_block_tokens`` calls, int-subclass token ids (``AllocateImmutableIntLike``: the same hit
as plain ints), the JSON codec, and the adapter's capability detection and plans on the bundled
allocator and vLLM 0.8."""

from __future__ import annotations

import json
import sys
from types import ModuleType

import pytest

from models.core.invariants import Invariant
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config, Generation
from models.families.v0.invariants import Family
from models.families.v0.malformed import ARGUMENTS, bad_values
from models.families.v0.operations import ErrorKind, Malformed, Op, op_from_json, op_to_json
from properties.core.calls import render
from properties.core.replay import run_program
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0.adapter import FamilyAdapter, Unsupported
from properties.families.v0.runner import Runner
from properties.families.v0.strategies import TokenId, int_like

from .trace import Trace

F = Family
VLLM = "properties.upstream:vllm_v0_allocator"


def _trace(**caps: object) -> Trace:
    """Block 0 (full, hashed: id 0) and block 1 (mutable after it, one token: id 1)."""
    t = Trace(bs=2, gpu=4, **caps)  # type: ignore[arg-type]
    t.do(ops.AllocateImmutable(None, (1, 2)), ids=[0], free=3, cached=[0])
    t.do(ops.AllocateMutable(0), ids=[1], free=2)
    t.do(ops.Append(1, (3,)))
    return t


def test_an_honest_answer_passes() -> None:
    t = _trace()
    h0 = t.chain_hash(0)
    t.do(ops.HashRecompute(0, True), value=[h0, h0])
    t.do(ops.HashRecompute(0, True, int_like=True), value=[h0, h0])
    # block 1 is partial: no hash, and the recomputed value (of a partial block) is not pinned
    t.do(ops.HashRecompute(1, False), value=[None, 12345])
    t.do(ops.Append(1, (4,)), cached=[0, 1])
    h1 = t.chain_hash(1)
    t.do(ops.HashRecompute(1, False), value=[h1, h1])


@pytest.mark.parametrize(("op", "value", "family"), [
    (ops.HashRecompute(0, True), "recomputed differs", F.HASH),
    (ops.HashRecompute(0, True, int_like=True), "recomputed differs", F.HASH),
    (ops.HashRecompute(0, True), "no hash", F.CACHE),
    (ops.HashRecompute(1, False), "hash of a partial block", F.CACHE),
    (ops.HashRecompute(0, True), "not a pair", F.HASH),
])
def test_a_wrong_answer_is_flagged(op: Op, value: str, family: Invariant) -> None:
    t = _trace()
    h0 = t.chain_hash(0)
    assert isinstance(h0, int)
    shown = {"recomputed differs": [h0, h0 + 1], "no hash": [None, h0],
             "hash of a partial block": [7, 7], "not a pair": h0}[value]
    t.rejects(family, op, value=shown)


@pytest.mark.parametrize(("error", "family"), [
    (ErrorKind.MISUSE, F.HASH),  # a typed refusal of a valid recomputation
    (ErrorKind.ASSERTION, F.CRASH),
    (ErrorKind.UNEXPECTED, F.CRASH),
])
def test_the_recomputation_must_succeed(error: ErrorKind, family: Invariant) -> None:
    _trace().rejects(family, ops.HashRecompute(0, True), error=error)


@pytest.mark.parametrize(("op", "why"), [
    (ops.HashRecompute(0, False), "is_first_block=False"),
    (ops.HashRecompute(1, True), "is_first_block=True"),
    (ops.HashRecompute(7, True), "never existed"),
    (ops.HashRecompute(1, False, sentinel=True), "sentinel"),
])
def test_contract(op: Op, why: str) -> None:
    error = _trace().oracle.contract_error(op)
    assert error is not None and why in error, error


def test_freed_blocks_and_unhashed_predecessors_are_out_of_contract() -> None:
    t = _trace()
    t.do(ops.Free(1), free=3)
    assert "was freed" in str(t.oracle.contract_error(ops.HashRecompute(1, False)))
    t = _trace()
    t.do(ops.Free(0), free=3, evictable=[0])  # block 1 still follows it
    assert "predecessor" in str(t.oracle.contract_error(ops.HashRecompute(1, False)))


def test_the_sentinel_is_for_vllm_generation_targets() -> None:
    assert _trace().oracle.contract_error(ops.HashRecompute(0, True, sentinel=True)) is None
    error = _trace(generation=Generation.APHRODITE).oracle.contract_error(
        ops.HashRecompute(0, True, sentinel=True))
    assert error is not None and "sentinel" in error


def test_naive_targets_have_no_content_hash() -> None:
    t = Trace(bs=2, gpu=2, prefix_caching=False)
    t.do(ops.AllocateImmutable(None, (1, 2)), ids=[0], free=1)
    assert "prefix-caching" in str(t.oracle.contract_error(ops.HashRecompute(0, True)))


def test_int_like_tokens_must_hit_their_plain_twin() -> None:
    t = _trace()
    t.do(ops.AllocateImmutableIntLike(None, (1, 2)), ids=[0], free=2)
    # keyed apart: a miss on a fresh id is a violation (the content is cached on id 0)
    _trace().rejects(F.CACHE, ops.AllocateImmutableIntLike(None, (1, 2)), ids=[2], free=1,
                     cached=[0, 2])


# --------------------------------------------------------------------------- malformed calls

#: (call, argument, value): every one is misuse on the state of ``_trace``.
MISUSE = [
    (ops.HashRecompute(0, True), "is_first_block", False),  # a non-first block without hash
    (ops.HashRecompute(1, False), "is_first_block", True),  # a first block given a hash
    (ops.HashRecompute(0, True), "is_first_block", "x"),
    (ops.HashRecompute(0, True), "is_first_block", 1),
    (ops.HashRecompute(0, True), "prev_block_hash", 0),
    (ops.HashRecompute(1, False), "prev_block_hash", None),
    (ops.HashRecompute(1, False), "prev_block_hash", "x"),
    (ops.HashRecompute(1, False), "token_ids", 7),
    (ops.HashRecompute(1, False), "token_ids", "ab"),
    (ops.HashRecompute(1, False), "token_ids", (1, 1.5)),
    (ops.HashRecompute(1, False), "token_ids", (None,)),
]


@pytest.mark.parametrize(("call", "argument", "bad"), MISUSE)
def test_a_malformed_hash_call_is_misuse(call: Op, argument: str, bad: object) -> None:
    t = _trace()
    op = Malformed(call, argument, bad)
    assert t.oracle.is_misuse(op), t.oracle.contract_error(op)
    t.do(op, error=ErrorKind.MISUSE)
    t.rejects(F.ATOMIC, op)  # accepted


@pytest.mark.parametrize(("call", "argument", "bad"), [
    (ops.HashRecompute(0, True), "is_first_block", True),
    (ops.HashRecompute(0, True), "prev_block_hash", None),
    (ops.HashRecompute(1, False), "prev_block_hash", 7),  # any int: a valid call
    (ops.HashRecompute(1, False), "token_ids", (5, -1, 2**64)),
    (ops.HashRecompute(1, False), "token_ids", (True,)),  # int-like: left open there
])
def test_a_well_formed_value_is_out_of_contract(call: Op, argument: str, bad: object) -> None:
    error = _trace().oracle.contract_error(Malformed(call, argument, bad))
    assert error is not None and "well-formed" in error, error


@pytest.mark.parametrize("argument", ["is_first_block", "prev_block_hash", "token_ids"])
@pytest.mark.parametrize("call", [ops.HashRecompute(0, True), ops.HashRecompute(1, False)])
def test_every_generated_bad_value_is_misuse(call: ops.HashRecompute, argument: str) -> None:
    """What the generators draw (``bad_values`` given the call's first flag or the block's
    tokens) is misuse for that call, including the flipped first flag."""
    t = _trace()
    like = (1, 2) if argument == "token_ids" else call.is_first_block
    bads = bad_values(ARGUMENTS[ops.HashRecompute, argument][0], t.config, like)
    assert len(bads) >= 3
    for bad in bads:
        assert t.oracle.is_misuse(Malformed(call, argument, bad)), (argument, bad)


def test_malformed_hash_calls_need_typed_errors() -> None:
    t = _trace(typed_errors=False)
    assert t.oracle.is_misuse(Malformed(ops.HashRecompute(0, True), "prev_block_hash", 0))
    assert t.oracle.contract_error(ops.HashRecompute(0, True)) is None


# --------------------------------------------------------------------------- codec


@pytest.mark.parametrize("op", [
    ops.HashRecompute(3, False, True),
    ops.HashRecompute(0, True, sentinel=True),
    ops.AllocateImmutableIntLike(1, (1, 2), ops.Dev.CPU, 5),
    Malformed(ops.HashRecompute(0, True), "token_ids", ("x", 1)),
])
def test_json_round_trip(op: Op) -> None:
    back = op_from_json(json.loads(json.dumps(op_to_json(op))))
    assert back == op and type(back) is type(op)
    assert ops.AllocateImmutableIntLike(None, (1,)) != ops.AllocateImmutable(None, (1,))


# --------------------------------------------------------------------------- targets


def _adapter(spec: str) -> FamilyAdapter:
    target = load_target(spec)
    return Runner(target, Config(2, 4, 2, target.caps)).adapter


@pytest.mark.parametrize("spec", [DEFAULT_SPEC, VLLM])
def test_both_generations_take_extra_hash_and_agree_with_themselves(spec: str) -> None:
    adapter = _adapter(spec)
    assert adapter.has_hash_recompute and adapter.hash_takes_extra
    plan = adapter.plan(ops.HashRecompute(1, False), {})
    assert render(plan.stmts[-1]) == ("b1.__class__.hash_block_tokens(False, "
                                      "b1.prev_block.content_hash, b1.token_ids, "
                                      "extra_hash=b1.extra_hash)")
    target = load_target(spec)
    program: list[Op] = [ops.AllocateImmutableChain(None, ((1, 2), (3, 4)), extra_hash=9),
                         ops.HashRecompute(0, True), ops.HashRecompute(1, False, True),
                         ops.HashRecompute(0, True, sentinel=True),
                         ops.AllocateImmutableIntLike(0, (3, 4), extra_hash=9),
                         ops.HashRecompute(2, False, True)]
    runner = run_program(target, Config(2, 4, 0, target.caps), program)
    values = [entry.outcome.value for entry in runner.log]
    assert values[1][0] == values[1][1] == values[3][1]
    assert values[2][0] == values[2][1] == values[5][0]
    assert runner.log[4].outcome.new_blocks == (2,)


def test_the_aphrodite_static_form_takes_no_extra_hash_and_no_sentinel() -> None:
    """Aphrodite's ``hash_block_tokens(is_first_block, prev_block_hash, token_ids)`` (no
    ``extra_hash``, no ``_none_hash``): detected from the signature and the class."""

    class StaticHashBlock:
        @staticmethod
        def hash_block_tokens(is_first_block: bool, prev_block_hash: int | None,
                              cur_block_token_ids: list[int]) -> int:
            return hash((is_first_block, prev_block_hash, *cur_block_token_ids))

    module = ModuleType("fake_aphrodite.prefix_caching_block")
    module.PrefixCachingBlock = StaticHashBlock  # type: ignore[attr-defined]
    sys.modules["fake_aphrodite.prefix_caching_block"] = module
    try:
        assert FamilyAdapter._detect_hash_function("fake_aphrodite") == (True, False, False)
    finally:
        del sys.modules["fake_aphrodite.prefix_caching_block"]
    adapter = _adapter(DEFAULT_SPEC)
    adapter.hash_takes_extra = adapter.hash_sentinel = False
    plan = adapter.plan(ops.HashRecompute(0, True), {})
    assert render(plan.stmts[-1]) == "b0.__class__.hash_block_tokens(True, None, b0.token_ids)"
    with pytest.raises(Unsupported):
        adapter.plan(ops.HashRecompute(0, True, sentinel=True), {})


def test_without_hash_block_tokens_there_is_no_plan() -> None:
    assert FamilyAdapter._detect_hash_function("no_such_package_here") == (False, False, False)
    adapter = _adapter(DEFAULT_SPEC)
    adapter.has_hash_recompute = False
    with pytest.raises(Unsupported):
        adapter.plan(ops.HashRecompute(0, True), {})


def test_int_like_tokens_are_an_int_subclass_equal_to_the_ints() -> None:
    tokens = int_like([0, 5, -1, 2**64])
    assert all(type(t) is TokenId and isinstance(t, int) for t in tokens)
    assert tokens == [0, 5, -1, 2**64] and hash(tuple(tokens)) == hash((0, 5, -1, 2**64))
