"""Decoder properties: any bytes decode to an in-contract program, deterministically, and
quickly; defaults when bytes run out; edits late in the input leave earlier operations alone;
targets without atomicity or typed errors are never fed what they cannot take."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.core.bytesource import ByteSource
from fuzz.core.execution import execute
from fuzz.families.v0.decoder import MAX_OPS, Decoder, Level
from models.families.v0.operations import op_to_json
from properties.core.targets import DEFAULT_SPEC, Target, load_target

LEVELS = list(Level)
FAST = settings(max_examples=25, deadline=None, database=None)


def test_bytesource_defaults_past_the_end() -> None:
    src = ByteSource(b"\x05")
    assert src.below(3) == 2
    assert src.exhausted
    assert (src.below(7), src.int_in(3, 9), src.pick("xyz"), src.flag(99)) == (0, 3, "x", False)
    assert src.subset([1, 2, 3], 3) == ()


def test_bytesource_neighbouring_bytes_give_neighbouring_choices() -> None:
    assert [ByteSource(bytes([b])).below(10) for b in (40, 41, 42)] == [0, 1, 2]
    assert ByteSource(b"\x01\x02").below(1000) == (0x0102 % 1000)


@pytest.mark.parametrize("level", LEVELS, ids=lambda lv: lv.value)
@FAST
@given(data=st.binary(max_size=200))
def test_any_bytes_decode_to_an_in_contract_program(level: Level, data: bytes) -> None:
    target = load_target(DEFAULT_SPEC)
    result = execute(data, target, level)
    assert result.stopped is None, result.stopped
    assert result.violation is None, str(result.violation)
    assert len(result.program) <= MAX_OPS
    assert len(result.program) <= len(data)


@pytest.mark.parametrize("level", LEVELS, ids=lambda lv: lv.value)
@FAST
@given(data=st.binary(max_size=120))
def test_decoding_is_deterministic(level: Level, data: bytes, bundled: Target) -> None:
    first = execute(data, bundled, level)
    second = execute(data, bundled, level)
    assert [op_to_json(o) for o in first.program] == [op_to_json(o) for o in second.program]
    assert first.config == second.config


@pytest.mark.parametrize("level", LEVELS, ids=lambda lv: lv.value)
@FAST
@given(data=st.binary(min_size=8, max_size=120), where=st.floats(0.3, 1.0),
       new=st.integers(0, 255))
def test_a_byte_edit_keeps_the_operations_before_it(level: Level, data: bytes, where: float,
                                                    new: int, bundled: Target) -> None:
    pos = min(int(where * len(data)), len(data) - 1)
    edited = data[:pos] + bytes([new]) + data[pos + 1:]
    before = execute(data, bundled, level)
    after = execute(edited, bundled, level)
    bounds = [*before.op_starts, before.consumed][1:]
    unchanged = sum(1 for end in bounds if end <= pos)
    assert [op_to_json(o) for o in before.program[:unchanged]] == \
        [op_to_json(o) for o in after.program[:unchanged]]


def test_small_inputs_terminate_fast(bundled: Target) -> None:
    started = time.perf_counter()
    for level in LEVELS:
        assert execute(b"", bundled, level).program == []
        for size in (1, 2, 3, 8, 16, 64):
            execute(bytes(range(7, 7 + size)), bundled, level)
            execute(b"\xff" * size, bundled, level)
    assert time.perf_counter() - started < 10.0


def test_pool_shape_comes_from_the_first_bytes(bundled: Target) -> None:
    config = Decoder(bytes([3, 4, 5]), Level.BLOCK, bundled.caps).config
    assert (config.block_size, config.num_gpu_blocks, config.num_cpu_blocks) == (4, 5, 5)
    no_swap = Decoder(bytes([3, 4, 5]), Level.BLOCK, bundled.caps.without("swap")).config
    assert no_swap.num_cpu_blocks == 0


@pytest.mark.parametrize("feature", ["atomic", "typed_errors"])
@FAST
@given(data=st.binary(min_size=16, max_size=200))
def test_weaker_targets_get_only_what_they_can_take(feature: str, data: bytes) -> None:
    """Without atomicity no operation that runs out half way; without typed errors no misuse
    (the oracle would end such a program as out of contract)."""
    target = load_target(DEFAULT_SPEC, disable=[feature])
    for level in LEVELS:
        result = execute(data, target, level)
        assert result.stopped is None, result.stopped
        assert result.violation is None, str(result.violation)
