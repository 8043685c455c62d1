"""What the decoder's evictor production reaches: the target's standalone evictor (docs/API.md
section 6) driven by add, update, remove, evict and membership questions, judged by the same
evictor model as the evictor machine. Each reach is shown by a hand-built input that the bundled
allocator passes and the zoo mutant it is for fails; a short seeded fuzz run finds an evictor
mutant through the evictor operations themselves."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from fuzz.cli import corpus_dir, dict_path, read_corpus, read_dict
from fuzz.core.engine import Engine
from fuzz.core.execution import Execution, execute
from fuzz.core.harness import Harness
from fuzz.families.v0.decoder import EVICTOR_KINDS, MAX_GPU_BLOCKS, Decoder, Level
from fuzz.families.v0.features import adapter_features
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from models.families.v0.operations import ErrorKind
from properties.core.targets import Target, load_target
from tests.fuzz.reach import extension_bytes

#: Block size 4, 12 GPU blocks, 3 CPU blocks.
WITH_CPU = bytes([3, MAX_GPU_BLOCKS - 1, 3])
THEN, NO_THEN = 0, 255  # the follow-up flag: another evictor operation follows, or not
VALID = 255  # the misuse flag byte (read for targets that take misuse): a valid operation
MISUSE = 0


def _evictor_entry(target: Target) -> bytes:
    """The opcode byte of the extension entry, then the byte that picks the evictor
    production (with the features the target's adapter finds; it must find an evictor)."""
    runner = execute(b"", target, Level.BLOCK).judge.runner
    assert runner is not None
    features = adapter_features(runner)
    assert features["evictor"]
    return extension_bytes(WITH_CPU, Level.BLOCK, target, "_evictor_op", **features)


def _run(data: bytes, target: Target) -> Execution:
    result = execute(data, target, Level.BLOCK)
    assert result.stopped is None, result.stopped
    return result


def _tie_input(t: Target) -> bytes:
    """Two candidates at the same time 1.0 (id 0 with 1 hashed token, id 1 with 3), an evict
    (the tie goes to the most hashed tokens: id 1), then ``0 in evictor``, ``1 in evictor``.
    Per operation: follow-up flag, which (0 add, 3 evict, 4 contains), misuse flag, time
    index; then the add's id pick, hash and token count, or the question's size and picks."""
    return (WITH_CPU + _evictor_entry(t)
            + bytes([THEN, 0, VALID, 1, 0, 5, 1])
            + bytes([THEN, 0, VALID, 1, 0, 6, 3])
            + bytes([THEN, 3, VALID, 0])
            + bytes([NO_THEN, 4, VALID, 0, 1, 0, 0]))


def test_an_evict_takes_the_deepest_of_a_tie(bundled: Target) -> None:
    result = _run(_tie_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.EvictorAdd(0, 5, 1, 1.0), ops.EvictorAdd(1, 6, 3, 1.0),
                              ops.EvictorEvict(), ops.EvictorContains((0, 1))]
    assert result.outcomes[2].value == [1, 6]
    assert result.outcomes[3].value == [True, False]


def test_evictor_ties_to_shallowest_fails() -> None:
    target = load_target("tests.zoo.v0.broken:evictor_ties_to_shallowest")
    result = _run(_tie_input(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.LRU, 2)


def _absent_remove_input(t: Target) -> bytes:
    """One candidate (id 0), then (misuse) ``remove`` of a non-candidate: the first absent
    id, 1."""
    return (WITH_CPU + _evictor_entry(t)
            + bytes([THEN, 0, VALID, 0, 0, 9, 2])
            + bytes([NO_THEN, 2, MISUSE, 0, 0]))


def test_remove_of_a_non_candidate_is_refused(bundled: Target) -> None:
    result = _run(_absent_remove_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.EvictorAdd(0, 9, 2, 0.0), ops.EvictorRemove(1)]
    assert result.outcomes[1].error is ErrorKind.MISUSE


def test_evictor_remove_absent_silent_fails() -> None:
    target = load_target("tests.zoo.v0.broken:evictor_remove_absent_silent")
    result = _run(_absent_remove_input(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.LEAK, 1)


def test_evictor_operations_are_offered_only_with_an_evictor(bundled: Target) -> None:
    kinds = {flag: Decoder(WITH_CPU, Level.BLOCK, bundled.caps, evictor=flag).kinds()
             for flag in (False, True)}
    assert kinds[True] >= EVICTOR_KINDS
    assert not EVICTOR_KINDS & kinds[False]
    sequence = Decoder(bytes([0, MAX_GPU_BLOCKS - 1, 0]), Level.SEQUENCE, bundled.caps,
                       evictor=True).kinds()
    assert not EVICTOR_KINDS & sequence
    runner = execute(b"", bundled, Level.BLOCK).judge.runner
    assert runner is not None
    assert adapter_features(runner)["evictor"]


def test_misuse_stays_out_for_targets_that_cannot_take_it(bundled: Target) -> None:
    """Without typed errors and atomicity no evictor misuse is produced (the evictor model
    would call it out of contract and end the program): seeded inputs that keep picking the
    evictor production all run to the end, and they do reach the evictor."""
    weak = replace(bundled, caps=replace(bundled.caps, typed_errors=False, atomic=False))
    rng = random.Random(4)
    emitted = 0
    for _ in range(40):
        body = b"".join(_evictor_entry(weak) + rng.randbytes(8) for _ in range(6))
        result = _run(WITH_CPU + body, weak)
        assert result.violation is None, str(result.violation)
        emitted += sum(op.kind in EVICTOR_KINDS for op in result.program)
    assert emitted >= 40


@pytest.mark.parametrize("mutant", ["evictor_update_forward_only",
                                    "evictor_remove_absent_silent"])
def test_a_short_seeded_fuzz_run_finds_an_evictor_mutant(mutant: str) -> None:
    """The block-level harness, from its seed corpus and dictionary, finds the mutant through
    an evictor operation (not an allocator-level symptom) within a small budget."""
    harness = Harness(Level.BLOCK).bind(load_target(f"tests.zoo.v0.broken:{mutant}"))
    level = Level.BLOCK.value
    engine = Engine(harness.run, read_corpus(corpus_dir(level)), seed=4,
                    dictionary=read_dict(dict_path(level)))
    stats = engine.fuzz(max_execs=300, stop_on_failure=True)
    assert stats.failures, f"{mutant} not found in {stats.execs} executions"
    violation = stats.failures[0].result.violation
    assert violation is not None and violation.op is not None
    assert violation.op.kind in EVICTOR_KINDS, violation
