"""The decoder's content-hash production (``Decoder._content_hash``): a block's content hash
against the block class's own ``hash_block_tokens``, int-subclass token ids (recomputed, and
re-requested as a hit on the plain-int original) and malformed hash calls. Each reach is shown
by a hand-built input that the bundled allocator passes and the zoo mutant it is for fails. A
recorded trace of int-subclass token ids round-trips through JSON and replays."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fuzz.core.execution import Execution, execute
from fuzz.families.v0 import features as v0_features
from fuzz.families.v0.decoder import MAX_GPU_BLOCKS, Decoder, Level
from fuzz.families.v0.trace import RecordingAllocator, read_trace, replay, write_trace
from models.core.invariants import Invariant
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from models.families.v0.operations import ErrorKind, op_to_json
from prefixcache import PrefixCacheError
from prefixcache.block_table import BlockTable
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.utils import Device
from properties.core.targets import Target, load_target
from properties.families.v0.strategies import int_like
from tests.fuzz.reach import extension_bytes

#: Block size 4, 12 GPU blocks, 3 CPU blocks.
WITH_CPU = bytes([3, MAX_GPU_BLOCKS - 1, 3])
NO_HIT = 255  # a hit flag byte that says "fresh tokens"
FLAG_TRUE = 0  # a flag byte read before the input ends: true


def _opcode(target: Target, production: str) -> bytes:
    names = [make.__name__ for make in Decoder(WITH_CPU, Level.BLOCK, target.caps).table]
    return bytes([names.index(production)])


def _content_hash(target: Target) -> bytes:
    """The extension entry's opcode byte, then the byte that picks ``_content_hash`` (the
    bundled allocator and its mutants have the block queries: ``use_adapter``)."""
    return extension_bytes(WITH_CPU, Level.BLOCK, target, "_content_hash", block_info=True,
                           hash_recompute=True)


def _chain(target: Target, *, filled: bool = False) -> bytes:
    """Block 0 (GPU, no extra key, tokens 1 2 3 0) and block 1 chained after it (3 2 1 0):
    immutable, or (``filled``) mutable and then filled by one append of 4 tokens (count byte
    3), so its hash is computed by the block itself on promotion."""
    extra = b"\x00" if target.caps.extra_keys and target.caps.vllm_api else b""
    first = _opcode(target, "_allocate_immutable") + b"\x00" + extra + bytes([NO_HIT, 1, 2, 3, 0])
    if filled:
        second = (_opcode(target, "_allocate_mutable") + b"\x01"
                  + _opcode(target, "_append") + bytes([3, 3, 2, 1, 0]))
    else:
        second = _opcode(target, "_allocate_immutable") + b"\x01" + bytes([NO_HIT, 3, 2, 1, 0])
    return WITH_CPU + first + second


def _run(data: bytes, target: Target) -> Execution:
    result = execute(data, target, Level.BLOCK)
    assert result.stopped is None, result.stopped
    return result


def _recompute_input(t: Target, *, int_like: bool, filled: bool = False) -> bytes:
    """The chain, then block 1 (pick byte 1) recomputed (mode byte 0)."""
    return (_chain(t, filled=filled) + _content_hash(t)
            + bytes([1, 0, FLAG_TRUE if int_like else 255]))


def _twin_input(t: Target) -> bytes:
    """The chain, then block 1's content re-requested with int-subclass token ids (mode 1),
    which must hit block 1's id, then the new block recomputed (the follow-up)."""
    return _chain(t) + _content_hash(t) + bytes([1, 1])


def _malformed_input(t: Target) -> bytes:
    """The chain, then ``hash_block_tokens`` for block 1 with ``is_first_block=True`` (mode 2,
    argument 0, value 0: a non-first block given as first with its predecessor's hash)."""
    return _chain(t) + _content_hash(t) + bytes([1, 2, 0, 0])


@pytest.mark.parametrize("filled", [False, True])
@pytest.mark.parametrize("int_like", [False, True])
def test_a_chained_block_hashes_as_its_class_says(bundled: Target, int_like: bool,
                                                  filled: bool) -> None:
    result = _run(_recompute_input(bundled, int_like=int_like, filled=filled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[-1] == ops.HashRecompute(1, False, int_like)
    shown, recomputed = result.outcomes[-1].value
    assert shown is not None and shown == recomputed


def test_the_int_like_twin_hits_the_original(bundled: Target) -> None:
    result = _run(_twin_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[2:] == [ops.AllocateImmutableIntLike(0, (3, 2, 1, 0)),
                                  ops.HashRecompute(2, False, True)]
    # a hit: the one free count the pair of blocks took is not taken again
    assert result.outcomes[2].error is None and result.outcomes[3].error is None


def test_hash_recompute_is_offered_only_when_the_adapter_finds_the_hash_function(
        bundled: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """A target whose blocks have no ``hash_block_tokens`` still gets the int-like
    re-requests, never a ``HashRecompute`` (which its adapter could not plan)."""
    kinds = {flag: Decoder(WITH_CPU, Level.BLOCK, bundled.caps, block_info=True,
                           hash_recompute=flag).kinds() for flag in (False, True)}
    assert ops.HashRecompute.kind in kinds[True]
    assert ops.HashRecompute.kind not in kinds[False]
    assert ops.AllocateImmutableIntLike.kind in kinds[False]
    found = v0_features.adapter_features
    monkeypatch.setattr(v0_features, "adapter_features",
                        lambda runner: {**found(runner), "hash_recompute": False})
    result = _run(_twin_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert ops.AllocateImmutableIntLike(0, (3, 2, 1, 0)) in result.program
    assert not any(isinstance(op, ops.HashRecompute) for op in result.program)


def test_a_malformed_hash_call_is_refused(bundled: Target) -> None:
    result = _run(_malformed_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[2] == ops.Malformed(ops.HashRecompute(1, False), "is_first_block", True)
    assert result.outcomes[2].error is ErrorKind.MISUSE


def _plain(t: Target) -> bytes:
    return _recompute_input(t, int_like=False)


def _filled(t: Target) -> bytes:
    return _recompute_input(t, int_like=False, filled=True)


def _int_like(t: Target) -> bytes:
    return _recompute_input(t, int_like=True)


@pytest.mark.parametrize(("mutant", "make", "family", "step"), [
    ("public_hash_drops_prefix", _plain, Family.HASH, 2),
    ("content_hash_unchained", _filled, Family.HASH, 3),
    ("int_like_tokens_keyed_apart", _int_like, Family.HASH, 2),
    ("int_like_tokens_keyed_apart", _twin_input, Family.HASH, 3),
    ("hash_arguments_unchecked", _malformed_input, Family.ATOMIC, 2),
])
def test_the_content_hash_mutants_fail(mutant: str, make: Callable[[Target], bytes],
                                       family: Invariant, step: int) -> None:
    target = load_target(f"tests.zoo.v0.broken:{mutant}")
    result = _run(make(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (family, step)


def test_a_trace_of_int_like_tokens_round_trips(tmp_path: Path, bundled: Target) -> None:
    """An engine that passes int-subclass token ids through the trace recorder: the trace is
    written as plain ints, reads back equal, and replays cleanly (the second prompt's full
    blocks hit the first's ids, int subclass or not)."""
    inner = CpuGpuBlockAllocator.create("prefix_caching", 6, 0, 2)
    recorder = RecordingAllocator(inner, 2, misuse_types=(PrefixCacheError,))
    first = BlockTable(block_size=2, block_allocator=recorder)  # type: ignore[arg-type]
    first.allocate(int_like([1, 2, 3, 4, 5]), device=Device.GPU)
    second = BlockTable(block_size=2, block_allocator=recorder)  # type: ignore[arg-type]
    second.allocate([1, 2, 3, 4, 6], device=Device.GPU)
    assert second.physical_block_ids[:2] == first.physical_block_ids[:2]
    path = tmp_path / "int_like.jsonl"
    write_trace(path, recorder)
    trace = read_trace(path)
    assert [op_to_json(e.op) for e in trace.entries] == \
        [op_to_json(e.op) for e in recorder.entries]
    assert all(type(t) is int for e in trace.entries
               for t in getattr(e.op, "tokens", ()) + sum(getattr(e.op, "chunks", ()), ()))
    result = replay(trace, bundled)
    assert result.ok, (result.violation, result.divergence, result.out_of_contract)
