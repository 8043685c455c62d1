"""What the decoder's freed-behind productions reach: a table's block freed through the
allocator, the damaged table's refused follow-up, and the computed tracker told about a
sequence that lost blocks. Each reach is a hand-built input the bundled allocator passes and
the zoo mutant it is for fails."""

from __future__ import annotations

from fuzz.core.execution import Execution, execute
from fuzz.families.v0.decoder import MAX_GPU_BLOCKS, Decoder, Level
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from models.families.v0.operations import ErrorKind
from properties.core.targets import Target, load_target
from tests.fuzz.reach import extension_bytes

#: Sequence level: block size 1, 12 GPU blocks, no CPU pool, one system prompt ``(1,)``.
SEQ_CONFIG = bytes([0, MAX_GPU_BLOCKS - 1, 0]) + bytes([0, 0, 1])


def _opcode(t: Target, production: str) -> bytes:
    names = [make.__name__ for make in Decoder(SEQ_CONFIG, Level.SEQUENCE, t.caps).table]
    return bytes([names.index(production)])


def _ext(t: Target, production: str) -> bytes:
    return extension_bytes(SEQ_CONFIG, Level.SEQUENCE, t, production, trackers=True)


def _allocate(t: Target, prompt: bool, tokens: tuple[int, ...]) -> bytes:
    """A table of the system prompt (or none) plus ``tokens`` (size byte: their count less the
    minimum, 1 without a prompt), no extra key."""
    extra = b"\x00" if t.caps.extra_keys and t.caps.vllm_api else b""
    size = len(tokens) - (0 if prompt else 1)
    return _opcode(t, "_table_allocate") + bytes([int(prompt), size, *tokens]) + extra


def _run(data: bytes, t: Target) -> Execution:
    result = execute(data, t, Level.SEQUENCE)
    assert result.stopped is None, result.stopped
    return result


def _free_behind_input(t: Target, pick: int) -> bytes:
    """Table (2, 3) (two blocks), its block the next token goes into freed (flag byte 0: the
    last one here), then (flag byte 0) a refused follow-up: a token byte, then ``pick`` among
    a fork and the second free (an append writes after the freed block: left open)."""
    return (SEQ_CONFIG + _allocate(t, False, (2, 3)) + _ext(t, "_free_behind")
            + bytes([0, 0, 0, pick]))


def test_a_freed_block_is_freed_again_and_refused(bundled: Target) -> None:
    result = _run(_free_behind_input(bundled, 1), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[1:] == [ops.TableFreeBlock(0, 1), ops.TableFreeBlock(0, 1)]
    assert [o.error for o in result.outcomes[1:]] == [None, ErrorKind.MISUSE]


def test_a_damaged_table_is_not_forked(bundled: Target) -> None:
    result = _run(_free_behind_input(bundled, 0), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[-1] == ops.TableFork(0)
    assert result.outcomes[-1].error is ErrorKind.MISUSE


def _lost_blocks_input(t: Target) -> bytes:
    """Table (1, 2, 3) tracked (tracker bytes: start, then pick 0: track table 0; no
    follow-up) and its blocks computed, asked (pick 4: its computed ids, list [0, 1]; no
    follow-ups), then asked with the ids of table (1,), which holds one block."""
    return (SEQ_CONFIG + _allocate(t, True, (2, 3)) + _allocate(t, False, (1,))
            + _ext(t, "_tracker") + bytes([0, 255]) + _opcode(t, "_mark_computed")
            + _ext(t, "_tracker") + bytes([4, 255, 255]) + _ext(t, "_tracker_misuse"))


def test_a_sequence_that_lost_blocks_is_refused(bundled: Target) -> None:
    result = _run(_lost_blocks_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[-2:] == [ops.SeqComputedIds(0), ops.SeqLostBlocks(0, 1)]
    assert result.outcomes[-2].value == [0, 1]
    assert result.outcomes[-1].error is ErrorKind.MISUSE


def test_tracker_keeps_lost_blocks_fails() -> None:
    target = load_target("tests.zoo.v0.broken:tracker_keeps_lost_blocks")
    result = _run(_lost_blocks_input(target), target)
    assert result.violation is not None
    assert result.violation.family is Family.COMPUTED
    assert result.program[-1] == ops.SeqLostBlocks(0, 1)

