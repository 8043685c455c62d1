"""Malformed arguments (``Malformed``): JSON round trip, the model's classification (misuse
of ErrorKind.MISUSE, or out of contract) and the oracle's verdicts (ATOMIC when a target
accepts one or changes state refusing it)."""

from __future__ import annotations

import json

import pytest

from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.invariants import Family
from models.families.v0.malformed import ARGUMENTS, Arg, bad_values, well_formed
from models.families.v0.operations import ErrorKind, Malformed, Op, op_from_json, op_to_json
from models.families.v0.oracle import OutOfContract

from .trace import CPU, GPU, Trace

F = Family
MISUSE = ErrorKind.MISUSE


def _trace(**caps: object) -> Trace:
    """Block 0 (full, hashed), block 1 (mutable after it) and table 0 (3 tokens)."""
    t = Trace(bs=2, gpu=6, cpu=2, **caps)  # type: ignore[arg-type]
    t.do(ops.AllocateImmutable(None, (1, 2)), ids=[0], free=(5, 2), cached=[0])
    t.do(ops.AllocateMutable(0), ids=[1], free=(4, 2))
    t.do(ops.TableAllocate((5, 6, 7)), table=(2, 3), free=(2, 2), cached=[0, 2])
    return t


@pytest.mark.parametrize("op", [
    Malformed(ops.AllocateImmutable(None, (1, 2)), "tokens", ("x", (1,), True, 1.5, None)),
    Malformed(ops.AllocateImmutableChain(None, ((1, 2),)), "chunks", ((True, 2), "ab")),
    Malformed(ops.Swap((0,), GPU, CPU), "dst", None),
    Malformed(ops.CountTouched((0,)), "lookahead", 2**64),
    Malformed(Malformed(ops.Free(0), "block", 0), "argument", "x"),
])
def test_json_round_trip_keeps_nested_calls_and_literals(op: Op) -> None:
    text = json.dumps(op_to_json(op))
    back = op_from_json(json.loads(text))
    assert back == op and hash(back) == hash(op)
    assert json.loads(text)["call"]["op"] == op.call.kind  # type: ignore[attr-defined]


# (call, argument, malformed value) on the state of ``_trace``; every one is misuse.
MISUSE_CASES: list[tuple[Op, str, object]] = [
    (ops.AllocateImmutable(None, (3, 4)), "tokens", (True, False)),
    (ops.AllocateImmutable(None, (3, 4)), "tokens", (3, 4.0)),
    (ops.AllocateImmutable(None, (3, 4)), "tokens", "34"),
    (ops.AllocateImmutable(None, (3, 4)), "extra_hash", True),
    (ops.AllocateImmutable(None, (3, 4)), "device", None),
    (ops.AllocateImmutable(None, (3, 4)), "prev", 0),
    (ops.AllocateImmutableChain(None, ((3, 4), (5, 6))), "chunks", ((3, 4), (5, "6"))),
    (ops.AllocateImmutableChain(None, ((3, 4),)), "chunks", None),
    (ops.AllocateMutable(None), "device", "gpu"),
    (ops.Append(1, (3,)), "tokens", (None,)),
    (ops.Fork(1), "block", None),
    (ops.Free(1), "block", ()),
    (ops.Swap((1,), GPU, CPU), "blocks", (0,)),
    (ops.Swap((1,), GPU, CPU), "src", 1.5),
    (ops.MarkAccessed((0,), 1.0), "now", True),
    (ops.MarkAccessed((0,), 1.0), "now", 2**53 + 1),
    (ops.MarkAccessed((0,), 1.0), "blocks", (6,)),  # a CPU id: unknown to the GPU
    (ops.MarkAccessed((0,), 1.0), "blocks", (2**64,)),
    (ops.ComputedBlockIds((0,), False), "blocks", ("0",)),
    (ops.CachedPrefix((0,)), "blocks", None),
    (ops.CountTouched((0,)), "lookahead", -1),
    (ops.CountTouched((0,)), "blocks", (None,)),
    (ops.CountFullTouched((0,)), "device", 0),
    (ops.HitRate(), "device", None),
    (ops.ResetPrefixCache(), "device", "gpu"),
    (ops.TableAllocate((1, 2)), "tokens", (1, True)),
    (ops.TableAppend(0, (1,)), "lookahead", -1),
    (ops.TableAppend(0, (1,)), "tokens", 1),
    (ops.TableEnsureSlots(0, 1), "slots", 1.5),
    (ops.TableMarkAccessed(0, 1.0), "now", "x"),
]


@pytest.mark.parametrize(("call", "argument", "bad"), MISUSE_CASES)
def test_a_malformed_argument_is_misuse_refused_with_no_trace(call: Op, argument: str,
                                                              bad: object) -> None:
    t = _trace()
    op = Malformed(call, argument, bad)
    assert t.oracle.is_misuse(op), t.oracle.contract_error(op)
    t.do(op, error=MISUSE)  # a typed error and the state of before: accepted
    t.rejects(F.ATOMIC, op)  # accepted without an error
    t.rejects(F.CRASH, op, error=ErrorKind.ASSERTION)  # an assert is no typed error
    t.rejects(F.ATOMIC, op, error=ErrorKind.NO_FREE_BLOCKS)  # argument checks come first


def test_refusing_a_malformed_argument_must_change_nothing() -> None:
    t = _trace()
    op = Malformed(ops.AllocateMutable(None), "device", None)
    t.rejects(F.ATOMIC, op, error=MISUSE, free=(1, 2))  # took a block, then raised


@pytest.mark.parametrize(("call", "argument", "bad", "why"), [
    (ops.AllocateImmutable(None, (3, 4)), "tokens", (3, 4), "well-formed"),
    (ops.AllocateImmutable(None, (3, 4)), "tokens", (-1, 2**64), "well-formed"),  # any ints
    (ops.CountTouched((0,)), "lookahead", 0, "well-formed"),
    (ops.ResetPrefixCache(), "device", None, "well-formed"),
    (ops.MarkAccessed((0,), 1.0), "blocks", (1,), "well-formed"),  # a GPU id
    (ops.ComputedBlockIds((0,), True), "blocks", (0, "x"), "well-formed"),  # skipped, unread
    (ops.MarkComputed(), "blocks", None, "not validated"),  # the argument is ignored
    (ops.Append(1, (3,)), "block", None, "not validated"),  # the receiver, not an argument
    (ops.Free(9), "block", None, "never existed"),  # the call itself is out of contract
    (Malformed(ops.Free(1), "block", None), "bad", 0, "malformed call of a malformed"),
])
def test_a_value_that_is_valid_or_unread_is_out_of_contract(call: Op, argument: str,
                                                             bad: object, why: str) -> None:
    t = _trace()
    op = Malformed(call, argument, bad)
    error = t.oracle.contract_error(op)
    assert error is not None and why in error, error
    assert not t.oracle.is_misuse(op)


def test_arguments_the_naive_allocator_ignores_are_out_of_contract_for_it() -> None:
    t = Trace(bs=2, gpu=4, prefix_caching=False)
    t.do(ops.AllocateImmutable(None, (1, 2)), ids=[0], free=3)
    for op in (Malformed(ops.MarkAccessed((0,), 1.0), "now", "x"),
               Malformed(ops.MarkAccessed((0,), 1.0), "blocks", (2**64,)),
               Malformed(ops.CachedPrefix((0,)), "blocks", None)):
        assert "naive allocator ignores" in str(t.oracle.contract_error(op))
    assert t.oracle.is_misuse(Malformed(ops.AllocateImmutable(None, (1, 2)), "tokens", (1, 2.5)))


def test_extra_hash_needs_a_target_with_extra_keys() -> None:
    op = Malformed(ops.AllocateImmutable(None, (1, 2)), "extra_hash", "x")
    assert _trace().oracle.is_misuse(op)
    assert "extra keys" in str(_trace(extra_keys=False).oracle.contract_error(op))


def test_malformed_calls_to_a_target_without_typed_errors_are_out_of_contract() -> None:
    t = Trace(bs=2, gpu=2, typed_errors=False)
    with pytest.raises(OutOfContract, match="misuse"):
        t.do(Malformed(ops.HitRate(), "device", None), error=ErrorKind.ASSERTION)


def test_a_swap_to_the_same_device_is_misuse() -> None:
    t = _trace()
    for op in (ops.Swap((1,), GPU, GPU), ops.TableSwap(0, GPU, GPU), ops.Swap((), CPU, CPU)):
        assert t.oracle.is_misuse(op)
        t.do(op, error=MISUSE)
    t.rejects(F.ATOMIC, ops.Swap((1,), GPU, GPU), error=MISUSE, moved={1: None}, free=(3, 2))
    assert not Trace(bs=2, gpu=2, cpu=1, swap=False).oracle.is_misuse(ops.Swap((), GPU, GPU))


@pytest.mark.parametrize(("call", "argument"), sorted(ARGUMENTS, key=repr))
def test_every_generated_bad_value_is_malformed(call: type[Op], argument: str) -> None:
    """``bad_values`` never offers a value the model accepts as well-formed."""
    t = _trace()
    config = Config(2, 6, 2, t.config.caps)
    arg = ARGUMENTS[call, argument][0]
    like = {Arg.TOKENS: (1, 2), Arg.CHUNKS: ((1, 2), (3, 4))}.get(arg)
    for bad in bad_values(arg, config, like):
        probe = Malformed(ops.ComputedBlockIds((), False) if call is ops.ComputedBlockIds
                          else ops.HitRate(), argument, bad)
        assert not well_formed(t.oracle.model, probe, arg), (call.kind, argument, bad)
