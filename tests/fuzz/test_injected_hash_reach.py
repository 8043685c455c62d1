"""What the decoder's injected-hash production reaches (``InjectedHash``,
``models.families.v0.injected_hash``): an allocator built by ``create`` with an order-blind hash,
judged on both devices. Shown by a hand-built input that the bundled allocator passes, and that
fails when
``create`` drops the hash for one device; vLLM 0.8's ``create`` takes none (not offered)."""

from __future__ import annotations

import pytest

from fuzz.core.execution import Execution, execute
from fuzz.families.v0.decoder import MAX_GPU_BLOCKS, Decoder, Level
from fuzz.families.v0.features import adapter_features
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from properties.core.targets import Target, load_target
from tests.fuzz.reach import extension_bytes

#: Block size 4, 12 GPU blocks, 3 CPU blocks.
WITH_CPU = bytes([3, MAX_GPU_BLOCKS - 1, 3])
VLLM = "properties.upstream:vllm_v0_allocator"


def _input(target: Target, block: tuple[int, ...], tail: tuple[int, ...]) -> bytes:
    runner = execute(b"", target, Level.BLOCK).judge.runner
    assert runner is not None
    features = adapter_features(runner)
    assert features["injected_hash"]
    return WITH_CPU + extension_bytes(WITH_CPU, Level.BLOCK, target, "_injected_hash",
                                      **features) + bytes([*block, *tail])


def _run(data: bytes, target: Target) -> Execution:
    result = execute(data, target, Level.BLOCK)
    assert result.stopped is None, result.stopped
    return result


def test_bundled_allocator_passes(bundled: Target) -> None:
    result = _run(_input(bundled, (0, 1, 2, 3), (3, 3, 1, 0)), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.InjectedHash((0, 1, 2, 3), (1, 2, 3, 0), (3, 3, 1, 0))]


@pytest.mark.parametrize("drop", ["gpu", "cpu"])
def test_a_create_that_drops_the_hash_on_one_device_fails(
        bundled: Target, monkeypatch: pytest.MonkeyPatch, drop: str) -> None:
    from prefixcache import cpu_gpu_block_allocator as cg

    made = cg.PrefixCachingBlockAllocator
    calls: list[int] = []

    def forgetful(*args: object, **kwargs: object) -> object:
        if kwargs.get("hash_function") is not None:  # the injected one (not the program's)
            calls.append(1)
            if (len(calls) % 2 == 1) == (drop == "gpu"):  # create builds the GPU one first
                kwargs.pop("hash_function")
        return made(*args, **kwargs)  # type: ignore[arg-type]

    data = _input(bundled, (0, 1, 2, 3), (3, 3, 1, 0))
    monkeypatch.setattr(cg, "PrefixCachingBlockAllocator", forgetful)
    result = execute(data, bundled, Level.BLOCK)
    assert result.violation is not None
    assert result.violation.family in (Family.HASH, Family.CACHE)


def test_vllm_is_not_offered_it() -> None:
    target = load_target(VLLM)
    runner = execute(b"", target, Level.BLOCK).judge.runner
    assert runner is not None
    features = adapter_features(runner)
    assert not features["injected_hash"]
    decoder = Decoder(WITH_CPU, Level.BLOCK, target.caps, **features)
    assert "_injected_hash" not in [make.__name__ for make in decoder.extensions]
    assert ops.InjectedHash.kind not in decoder.kinds()
