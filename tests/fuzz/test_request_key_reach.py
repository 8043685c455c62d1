"""What the decoder reaches for request keys: bytes keys in its alphabet, and (through the
extension entry) a malformed argument of the target's own key builder, shown by hand-built
inputs that the bundled allocator passes and the zoo mutant they are for fails."""

from __future__ import annotations

import pytest

from fuzz.core.execution import Execution, execute
from fuzz.families.v0.decoder import MAX_GPU_BLOCKS, Decoder, Level, extras_for
from fuzz.families.v0.features import adapter_features
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, ErrorKind, ExtraKey
from models.families.v0.request_keys import KEY_ARGUMENTS, bad_values
from properties.core.targets import Target, load_target
from tests.fuzz.reach import extension_bytes

#: Block size 4, 12 GPU blocks, 3 CPU blocks.
WITH_CPU = bytes([3, MAX_GPU_BLOCKS - 1, 3])
NO_HIT = 255  # a hit flag byte that says "fresh tokens"
LORA = "extra_hash.lora_id"


@pytest.fixture(scope="module")
def bundled() -> Target:
    return load_target()


def _index(extras: list[ops.Extra], key: ExtraKey) -> int:
    """Where ``key`` is, spelled as it is (``ExtraKey`` equality ignores the salt's type)."""
    return [repr(e) for e in extras].index(repr(key))


def _malformed_key_input(t: Target, key: ExtraKey, argument: str, bad: object) -> bytes:
    """The key builder production: argument, key, four plain tokens (1, 2, 3, 0), bad value."""
    judge = execute(b"", t, Level.BLOCK).judge
    runner = judge.runner if judge is not None else None
    features = adapter_features(runner) if runner is not None else {}
    keys: list[ops.Extra] = [e for e in extras_for(t.caps, adversarial=False)
                             if isinstance(e, ExtraKey)]
    return (WITH_CPU + extension_bytes(WITH_CPU, Level.BLOCK, t, "_malformed_key", **features)
            + bytes([sorted(KEY_ARGUMENTS).index(argument), _index(keys, key), 1, 2, 3, 0,
                     bad_values(KEY_ARGUMENTS[argument]).index(bad)]))


def _run(data: bytes, target: Target) -> Execution:
    result = execute(data, target, Level.BLOCK)
    assert result.stopped is None, result.stopped
    return result


@pytest.mark.parametrize("argument, bad", [(LORA, True), ("extra_hash.cache_salt", 5),
                                           ("extra_hash.mm_hashes", "ab"),
                                           ("extra_hash.mm_hashes", (1.5,))])
def test_a_malformed_key_argument_is_refused(bundled: Target, argument: str,
                                             bad: object) -> None:
    key = ExtraKey(cache_salt=b"a")
    result = _run(_malformed_key_input(bundled, key, argument, bad), bundled)
    assert result.violation is None, str(result.violation)
    call = ops.AllocateImmutable(None, (1, 2, 3, 0), Dev.GPU, key)
    assert result.program == [ops.Malformed(call, argument, bad)]
    assert result.outcomes[0].error is ErrorKind.MISUSE


def test_a_key_builder_taking_a_bool_lora_fails() -> None:
    target = load_target("tests.zoo.v0.broken:key_builder_bool_lora")
    result = _run(_malformed_key_input(target, ExtraKey(lora_id=1), LORA, True), target)
    assert result.violation is not None and result.violation.family is Family.ATOMIC


def test_no_key_builder_production_without_one(bundled: Target) -> None:
    vllm = load_target("properties.upstream:vllm_v0_allocator")
    for target, present in ((bundled, True), (vllm, False)):
        names = [m.__name__ for m in Decoder(WITH_CPU, Level.BLOCK, target.caps).extensions]
        assert ("_malformed_key" in names) is present


def test_bytes_keys_only_for_targets_that_take_them(bundled: Target) -> None:
    for adversarial in (False, True):
        keys = [e for e in extras_for(bundled.caps, adversarial=adversarial)
                if isinstance(e, ExtraKey)]
        assert any("bytes" in k.fields_used for k in keys)
        vllm = load_target("properties.upstream:vllm_v0_allocator")
        assert not any(isinstance(e, ExtraKey) and "bytes" in e.fields_used
                       for e in extras_for(vllm.caps, adversarial=adversarial))


def _respelled_input(t: Target) -> bytes:
    """A block salted "a", then the same tokens salted b"a": one key, so the second hits."""
    extras = list(extras_for(t.caps, adversarial=False))

    def block(key: ExtraKey) -> bytes:
        names = [m.__name__ for m in Decoder(WITH_CPU, Level.BLOCK, t.caps).table]
        return bytes([names.index("_allocate_immutable")]) + b"\x00" \
            + bytes([_index(extras, key), NO_HIT, 1, 2, 3, 0])
    first = block(ExtraKey(cache_salt="a"))
    return WITH_CPU + first + block(ExtraKey(cache_salt=b"a"))[:1] + b"\x00" \
        + block(ExtraKey(cache_salt=b"a"))[1:]


def test_a_respelled_salt_hits(bundled: Target) -> None:
    result = _run(_respelled_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert [op.extra_hash for op in result.program  # type: ignore[attr-defined]
            ] == [ExtraKey(cache_salt="a"), ExtraKey(cache_salt=b"a")]
    assert isinstance(result.program[1], ops.AllocateImmutable)
    assert result.program[1].extra_hash.cache_salt == b"a"  # type: ignore[union-attr]


def test_a_key_builder_keeping_bytes_salts_apart_fails() -> None:
    target = load_target("tests.zoo.v0.broken:key_builder_bytes_salt_apart")
    result = _run(_respelled_input(target), target)
    assert result.violation is not None and result.violation.step == 1
    assert result.violation.family in (Family.HASH, Family.CACHE)
