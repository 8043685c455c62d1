"""What the decoder's construction production reaches: an allocator built beside the program's
over explicit ids (``Construct``), alone or as both devices, and (for targets that take misuse)
with one constructor argument malformed, judged by ``models.families.v0.ops.construction``.
Each reach is shown by a hand-built input that the bundled allocator passes and the zoo mutant
it is for fails; vLLM 0.8 builds its own classes the same way."""

from __future__ import annotations

import pytest

from fuzz.core.execution import Execution, execute
from fuzz.families.v0.decoder import CONSTRUCT_IDS, MAX_GPU_BLOCKS, Level
from fuzz.families.v0.features import adapter_features
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from models.families.v0.operations import ErrorKind
from properties.core.targets import Target, load_target
from tests.fuzz.reach import extension_bytes

#: Block size 4, 12 GPU blocks, 3 CPU blocks.
WITH_CPU = bytes([3, MAX_GPU_BLOCKS - 1, 3])
NAIVE, CACHING = 0, 1  # the allocator byte
NO, YES = 255, 0  # flag bytes (devices, malformed)
VLLM = "properties.upstream:vllm_v0_allocator"


def _entry(target: Target) -> bytes:
    """The opcode byte of the extension entry, then the byte that picks the construction
    production (with the features the target's adapter finds; it must find the classes)."""
    runner = execute(b"", target, Level.BLOCK).judge.runner
    assert runner is not None
    features = adapter_features(runner)
    assert features["construct"]
    return extension_bytes(WITH_CPU, Level.BLOCK, target, "_construct", **features)


def _ids(*ids: int, taken: tuple[int, ...] = ()) -> bytes:
    """The subset bytes that draw ``ids`` in this order from :data:`CONSTRUCT_IDS` less
    ``taken``."""
    pool, out = [i for i in CONSTRUCT_IDS if i not in taken], [len(ids)]
    for i in ids:
        out.append(pool.index(i))
        pool.remove(i)
    return bytes(out)


def _run(data: bytes, target: Target) -> Execution:
    result = execute(data, target, Level.BLOCK)
    assert result.stopped is None, result.stopped
    return result


def _permuted(t: Target) -> bytes:
    """A prefix-caching allocator over ids 3, 1, 2 (contiguous, permuted), one device, no
    malformed argument (the target takes misuse: the flag byte is read)."""
    return WITH_CPU + _entry(t) + bytes([CACHING]) + _ids(3, 1, 2) + bytes([NO, NO])


def test_explicit_ids_are_handed_out_in_the_given_order(bundled: Target) -> None:
    result = _run(_permuted(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.Construct("prefix_caching", (3, 1, 2))]
    assert result.outcomes[0].value == {"total": [3], "free": [3], "all": [1, 2, 3],
                                        "physical": [2, 0, 1], "handed": [3, 1, 2],
                                        "free_after": [0]}


def test_vllm_builds_its_own_classes_the_same_way() -> None:
    target = load_target(VLLM)
    gpu, cpu = (2**64 - 1, 5), (0, 13)
    data = (WITH_CPU + _entry(target) + bytes([NAIVE]) + _ids(*gpu) + bytes([YES])
            + _ids(*cpu, taken=gpu))
    result = _run(data, target)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.Construct("naive", gpu, True, cpu)]
    assert result.outcomes[0].value["handed"] == [*gpu, *cpu]
    assert result.outcomes[0].value["physical"] == [1, 0, 0, 1]


def test_ids_assumed_contiguous_fails() -> None:
    """Ids 5, 1, 3 are not a range: the mutant hands out 2, which it was never given (the
    order a constructed allocator hands its ids out in is open, so a permuted range would
    not show it)."""
    target = load_target("tests.zoo.v0.broken:block_ids_assumed_contiguous")
    data = WITH_CPU + _entry(target) + bytes([CACHING]) + _ids(5, 1, 3) + bytes([NO, NO])
    result = _run(data, target)
    assert result.violation is not None
    assert result.violation.step == 0, str(result.violation)
    assert result.violation.family in (Family.LEAK, Family.ATOMIC), str(result.violation)


@pytest.mark.parametrize(("argument", "mutant", "op"), [
    (0, "lenient_block_ids", ops.Construct("prefix_caching", (1, 0), argument="block_ids",
                                           bad=(1, 1))),
    (4, "create_accepts_any_type", ops.Construct("prefix_caching", (1, 0),
                                                 argument="allocator_type", bad="x")),
])
def test_a_malformed_constructor_argument_is_refused(bundled: Target, argument: int,
                                                     mutant: str, op: ops.Construct) -> None:
    """The argument byte picks among block_ids, num_blocks, block_size, eviction_policy and
    allocator_type (one prefix-caching device); the value byte picks the first bad value."""
    def data(t: Target) -> bytes:
        return (WITH_CPU + _entry(t) + bytes([CACHING]) + _ids(1, 0)
                + bytes([NO, YES, argument, 0]))

    result = _run(data(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program == [op]
    assert result.outcomes[0].error is ErrorKind.MISUSE
    target = load_target(f"tests.zoo.v0.broken:{mutant}")
    result = _run(data(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.ATOMIC, 0)
