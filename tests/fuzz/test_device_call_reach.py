"""What the decoder's device-call production reaches: one device's own allocator called
directly (``DeviceSwap`` and the device-level misuse, ``models.families.v0.ops.device``). Each
reach is shown by a hand-built input that the bundled allocator passes and the zoo mutant it is for
fails."""

from __future__ import annotations

from fuzz.core.execution import Execution, execute
from fuzz.families.v0.decoder import (
    DEVICE_KINDS,
    DEVICE_MISUSE_KINDS,
    MAX_GPU_BLOCKS,
    Decoder,
    Level,
)
from fuzz.families.v0.features import adapter_features
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, ErrorKind
from properties.core.targets import Target, load_target
from tests.fuzz.reach import extension_bytes

#: Block size 4, 12 GPU blocks, 3 CPU blocks.
WITH_CPU = bytes([3, MAX_GPU_BLOCKS - 1, 3])
VALID, MISUSE = 255, 0  # the misuse flag byte (read for targets that take misuse)
ONE, CHAIN = 255, 0  # the chain flag byte of a swap


def _features(target: Target) -> dict[str, bool]:
    runner = execute(b"", target, Level.BLOCK).judge.runner
    assert runner is not None
    features = adapter_features(runner)
    assert features["device_calls"]
    return features


def _device_entry(target: Target) -> bytes:
    """The opcode byte of the extension entry, then the byte that picks ``_device_call``."""
    return extension_bytes(WITH_CPU, Level.BLOCK, target, "_device_call", **_features(target))


def _mutable(target: Target) -> bytes:
    """A mutable GPU block starting a chain (the device byte picks the GPU)."""
    names = [make.__name__ for make in Decoder(WITH_CPU, Level.BLOCK, target.caps).table]
    return bytes([names.index("_allocate_mutable"), 0])


def _run(data: bytes, target: Target) -> Execution:
    result = execute(data, target, Level.BLOCK)
    assert result.stopped is None, result.stopped
    return result


def _swap_input(t: Target) -> bytes:
    """A mutable GPU block swapped by hand to the CPU and back (misuse flag, chain flag; the
    one live block is picked without a byte)."""
    entry = _device_entry(t)
    return WITH_CPU + _mutable(t) + entry + bytes([VALID, ONE]) + entry + bytes([VALID, CHAIN])


def test_a_swap_by_hand_goes_out_and_back(bundled: Target) -> None:
    result = _run(_swap_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[1:] == [ops.DeviceSwap((0,), Dev.GPU, Dev.CPU),
                                  ops.DeviceSwap((0,), Dev.CPU, Dev.GPU)]
    assert result.outcomes[1].value == {"pairs": [[0, 12]], "swapped": True}
    assert result.outcomes[2].value == {"pairs": [[12, 0]], "swapped": True}


def _held_input(t: Target) -> bytes:
    """A mutable GPU block, then ``swap_in`` of it on the CPU (misuse flag, device pick: CPU,
    action pick: ``swap_in_held``; the one live block is picked without a byte)."""
    return WITH_CPU + _mutable(t) + _device_entry(t) + bytes([MISUSE, 1, 2])


def test_a_swap_in_of_a_held_block_is_refused(bundled: Target) -> None:
    result = _run(_held_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[1] == ops.DeviceSwapMisuse("swap_in_held", (0,), Dev.CPU)
    assert result.outcomes[1].error is ErrorKind.MISUSE


def test_a_swap_in_that_takes_held_blocks_fails() -> None:
    target = load_target("tests.zoo.v0.broken:swap_in_takes_held_blocks")
    result = _run(_held_input(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.SWAP, 1)


def test_device_calls_are_offered_only_with_per_device_allocators(bundled: Target) -> None:
    kinds = {flag: Decoder(WITH_CPU, Level.BLOCK, bundled.caps, device_calls=flag).kinds()
             for flag in (False, True)}
    assert kinds[True] >= DEVICE_KINDS - {ops.DeviceFreeId.kind}
    assert not DEVICE_KINDS & kinds[False]
    no_cpu = Decoder(bytes([3, MAX_GPU_BLOCKS - 1, 0]), Level.BLOCK, bundled.caps,
                     device_calls=True).kinds()
    assert ops.DeviceSwap.kind not in no_cpu
    assert no_cpu >= DEVICE_MISUSE_KINDS
    vllm = load_target("properties.upstream:vllm_v0_allocator")
    assert not DEVICE_MISUSE_KINDS & Decoder(WITH_CPU, Level.BLOCK, vllm.caps,
                                             device_calls=True).kinds()
