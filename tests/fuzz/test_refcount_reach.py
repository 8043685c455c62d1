"""What the decoder's refcount production reaches: the target's standalone ``RefCounter`` and
``CopyOnWriteTracker`` (docs/API.md §7) driven by incr, decr, get (directly and through the
read-only view), ``is_appendable``, ``record_cow`` and ``clear_cows``, judged by the same model
as the refcount machine. Each reach is shown by a hand-built input that the bundled allocator
passes and the zoo mutant it is for fails; seeded random inputs through the production find a
mutant, and never feed misuse to a target that cannot take it."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from fuzz.core.execution import Execution, execute
from fuzz.families.v0.decoder import MAX_GPU_BLOCKS, REFCOUNT_KINDS, Decoder, Level
from fuzz.families.v0.features import adapter_features
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from models.families.v0.operations import ErrorKind
from properties.core.targets import Target, load_target
from tests.fuzz.reach import extension_bytes

#: Block size 4, 12 GPU blocks, 3 CPU blocks.
WITH_CPU = bytes([3, MAX_GPU_BLOCKS - 1, 3])
THEN, NO_THEN = 0, 255  # the follow-up flag: another refcount operation follows, or not
VALID = 255  # the misuse flag byte (read for targets that take misuse): a valid operation
MISUSE = 0
NO, YES = 255, 0  # other flags


def _refcount_entry(target: Target) -> bytes:
    """The opcode byte of the extension entry, then the byte that picks the refcount
    production (with the features the target's adapter finds; it must find the classes)."""
    runner = execute(b"", target, Level.BLOCK).judge.runner
    assert runner is not None
    features = adapter_features(runner)
    assert features["refcount"]
    return extension_bytes(WITH_CPU, Level.BLOCK, target, "_refcount_op", **features)


def _run(data: bytes, target: Target) -> Execution:
    result = execute(data, target, Level.BLOCK)
    assert result.stopped is None, result.stopped
    return result


def _shared_input(t: Target, *, typed: bool = True) -> bytes:
    """A counter over id 3, two ``incr`` of it, then ``is_appendable`` of a block holding it
    (shared by two: not appendable). Per operation: follow-up flag, which (6 new, 0 incr,
    3 appendable), the misuse flag (typed targets only), then the choices: the new counter's
    size and ids, the appendable's no-id flag (picks among one id read no byte)."""
    valid = bytes([VALID]) if typed else b""
    return (WITH_CPU + _refcount_entry(t)
            + bytes([THEN, 6, 0, 3])
            + bytes([THEN, 0]) + valid
            + bytes([THEN, 0]) + valid
            + bytes([NO_THEN, 3]) + valid + bytes([NO]))


def test_a_block_shared_by_two_is_not_appendable(bundled: Target) -> None:
    result = _run(_shared_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.RefNew((3,)), ops.RefIncr(3), ops.RefIncr(3),
                              ops.CowAppendable(3)]
    assert [o.value for o in result.outcomes] == [None, 1, 2, False]


def test_cow_appendable_shared_by_two_fails() -> None:
    target = load_target("tests.zoo.v0.broken:cow_appendable_shared_by_two")
    result = _run(_shared_input(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.COW, 3)


def test_vllm_follows_the_same_program() -> None:
    target = load_target("properties.upstream:vllm_v0_allocator")
    result = _run(_shared_input(target, typed=False), target)
    assert result.violation is None, str(result.violation)
    assert [o.value for o in result.outcomes] == [None, 1, 2, False]


def _decr_at_zero_input(t: Target) -> bytes:
    """A counter over id 2, then (misuse) ``decr`` of it at 0: which 1, misuse flag, the
    view flag (no; the pick among the one id at 0 reads no byte)."""
    return (WITH_CPU + _refcount_entry(t)
            + bytes([THEN, 6, 0, 2])
            + bytes([NO_THEN, 1, MISUSE, NO]))


def test_decr_at_zero_is_refused(bundled: Target) -> None:
    result = _run(_decr_at_zero_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.RefNew((2,)), ops.RefDecr(2)]
    assert result.outcomes[1].error is ErrorKind.MISUSE


def test_refcount_decr_clamps_at_zero_fails() -> None:
    target = load_target("tests.zoo.v0.broken:refcount_decr_clamps_at_zero")
    result = _run(_decr_at_zero_input(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.RC, 1)


def test_refcount_operations_are_offered_only_with_the_classes(bundled: Target) -> None:
    kinds = {flag: Decoder(WITH_CPU, Level.BLOCK, bundled.caps, refcount=flag).kinds()
             for flag in (False, True)}
    assert kinds[True] >= REFCOUNT_KINDS
    assert not REFCOUNT_KINDS & kinds[False]
    sequence = Decoder(bytes([0, MAX_GPU_BLOCKS - 1, 0]), Level.SEQUENCE, bundled.caps,
                       refcount=True).kinds()
    assert not REFCOUNT_KINDS & sequence


def _random_inputs(target: Target, seed: int, count: int) -> list[bytes]:
    """Inputs that keep picking the refcount production, with random choices."""
    rng = random.Random(seed)
    entry = _refcount_entry(target)
    return [WITH_CPU + b"".join(entry + rng.randbytes(8) for _ in range(6))
            for _ in range(count)]


def test_misuse_stays_out_for_targets_that_cannot_take_it(bundled: Target) -> None:
    """Without typed errors and atomicity no refcount misuse is produced (the model would call
    it out of contract and end the program): seeded inputs all run to the end, and they do
    reach the counter and the tracker."""
    weak = replace(bundled, caps=replace(bundled.caps, typed_errors=False, atomic=False))
    kinds: set[str] = set()
    for data in _random_inputs(weak, 4, 40):
        result = _run(data, weak)
        assert result.violation is None, str(result.violation)
        assert all(o.error is None for o in result.outcomes)
        kinds |= {op.kind for op in result.program}
    assert kinds >= REFCOUNT_KINDS


@pytest.mark.parametrize("mutant", ["cow_clear_keeps_pairs", "refcount_view_allows_incr"])
def test_seeded_inputs_find_a_refcount_mutant(mutant: str, bundled: Target) -> None:
    """Random choices through the production find the mutant within a few dozen inputs,
    through a refcount operation; the bundled allocator passes the inputs tried."""
    target = load_target(f"tests.zoo.v0.broken:{mutant}")
    found = None
    for data in _random_inputs(target, 4, 60):
        assert _run(data, bundled).violation is None
        found = _run(data, target).violation
        if found is not None:
            break
    assert found is not None and isinstance(found.op, ops.Op)
    assert found.op.kind in REFCOUNT_KINDS
