"""What the decoder's extension entry reaches: table queries (id space, swap log, slot
read-outs), sliding-window tables and the null block, engine-side questions (common computed
ids, hit-rate bursts, per-sequence trackers) and malformed arguments. Each reach is shown by a
hand-built input that the bundled allocator passes and the zoo mutant it is for fails."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from fuzz.core.execution import Execution, execute
from fuzz.families.v0.decoder import MAX_GPU_BLOCKS, TRACKER_KINDS, Decoder, Level, extras_for
from models.families.v0 import operations as ops
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, ErrorKind
from properties.core.targets import Target, load_target
from properties.families.v0.adapter import FamilyAdapter
from tests.fuzz.reach import extension_bytes

#: Block size 4, 12 GPU blocks, 3 CPU blocks (ids 12..14).
WITH_CPU = bytes([3, MAX_GPU_BLOCKS - 1, 3])
#: Sequence level: block size 1, 12 GPU blocks, no CPU pool, one system prompt ``(1,)``.
SEQ_CONFIG = bytes([0, MAX_GPU_BLOCKS - 1, 0]) + bytes([0, 0, 1])
NO_HIT = 255  # a hit flag byte that says "fresh tokens"


def _opcode(config: bytes, level: Level, target: Target, production: str) -> bytes:
    """The opcode byte of a main-table production."""
    names = [make.__name__ for make in Decoder(config, level, target.caps).table]
    return bytes([names.index(production)])


def _ext(config: bytes, level: Level, target: Target, production: str, *,
         trackers: bool = False, block_info: bool = False) -> bytes:
    """The opcode byte of the extension entry, then the byte that picks ``production``."""
    return extension_bytes(config, level, target, production, trackers=trackers,
                           block_info=block_info)


def _immutable(target: Target, tokens: tuple[int, ...], *, first: bool = True) -> bytes:
    """An immutable GPU block of fresh ``tokens`` (plain alphabet: 0..3) starting a chain.
    The choice of a chain to extend reads a byte only when there is one (not ``first``)."""
    extra = b"\x00" if target.caps.extra_keys and target.caps.vllm_api else b""
    prev = b"" if first else b"\x00"
    return (_opcode(WITH_CPU, Level.BLOCK, target, "_allocate_immutable") + prev + b"\x00"
            + extra + bytes([NO_HIT, *tokens]))


def _run(data: bytes, target: Target, level: Level = Level.BLOCK) -> Execution:
    result = execute(data, target, level)
    assert result.stopped is None, result.stopped
    return result


def _swap_log_input(t: Target) -> bytes:
    """A mutable GPU block swapped to the CPU, then the swap log read twice (a choice among
    one option reads no byte)."""
    log = _ext(WITH_CPU, Level.BLOCK, t, "_swap_log")
    return (WITH_CPU + _opcode(WITH_CPU, Level.BLOCK, t, "_allocate_mutable") + b"\x00"
            + _opcode(WITH_CPU, Level.BLOCK, t, "_swap") + log + log)


def test_the_swap_log_is_read_and_reset(bundled: Target) -> None:
    result = _run(_swap_log_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[2:] == [ops.SwapLog(), ops.SwapLog()]
    assert len(result.outcomes[2].value) == 1
    assert result.outcomes[3].value == []


def test_swap_log_not_reset_fails() -> None:
    target = load_target("tests.zoo.v0.broken:swap_log_not_reset")
    result = _run(_swap_log_input(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.SWAP, 3)


def _id_space_input(t: Target) -> bytes:
    """The CPU's size, every id, and the physical id of CPU id 14 (subset of one, third id)."""
    return WITH_CPU + _ext(WITH_CPU, Level.BLOCK, t, "_id_space") + bytes([1, 0, 2])


def test_physical_ids_are_device_positions(bundled: Target) -> None:
    result = _run(_id_space_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.IdSpace(Dev.CPU, (14,))]
    assert result.outcomes[0].value == {"total": 3, "all": list(range(15)), "physical": [2]}


def test_physical_id_not_offset_fails() -> None:
    target = load_target("tests.zoo.v0.broken:physical_id_not_offset")
    result = _run(_id_space_input(target), target)
    assert result.violation is not None
    assert result.violation.family is Family.SWAP


def _common_computed_input(t: Target) -> bytes:
    """Two one-block GPU chains of different content, then the common computed ids of the
    batch ``[[b0], [b1]]`` (two lists, each its whole chain)."""
    return (WITH_CPU + _immutable(t, (1, 2, 3, 0)) + _immutable(t, (3, 2, 1, 0), first=False)
            + _ext(WITH_CPU, Level.BLOCK, t, "_common_computed_ids") + bytes([1, 0, 1, 1, 1]))


def test_common_computed_ids_of_a_batch(bundled: Target) -> None:
    result = _run(_common_computed_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[-1] == ops.CommonComputedIds(((0,), (1,)))
    assert result.outcomes[-1].value == []


def test_common_computed_shortest_fails() -> None:
    target = load_target("tests.zoo.v0.broken:common_computed_shortest")
    result = _run(_common_computed_input(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.COMPUTED, 2)


def _hit_burst_input(t: Target) -> bytes:
    """A held, cached block (the only one: picking it reads no byte), then 1001 requests for
    its content; the follow-up (no bytes left) reads the hit rate."""
    return (WITH_CPU + _immutable(t, (1, 2, 3, 0))
            + _ext(WITH_CPU, Level.BLOCK, t, "_hit_burst") + bytes([2]))


def test_a_hit_burst_past_the_window_then_the_rate(bundled: Target) -> None:
    result = _run(_hit_burst_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[1:] == [ops.HitBurst(0, 1001, Dev.GPU), ops.HitRate(Dev.GPU)]
    assert result.outcomes[2].value == pytest.approx(1001 / 1002)


def test_hit_rate_window_forgets_fails() -> None:
    target = load_target("tests.zoo.v0.broken:hit_rate_window_forgets")
    result = _run(_hit_burst_input(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.HIT, 2)


def _window_input(t: Target) -> bytes:
    """A sliding-window table (window 1) of tokens 2 3 (one padding token), a decode step
    with everything computed (block 0 leaves the window, the null block takes its entry),
    then ``free`` of the table."""
    extra = b"\x00" if t.caps.extra_keys and t.caps.vllm_api else b""
    allocate = _ext(SEQ_CONFIG, Level.SEQUENCE, t, "_table_allocate_windowed") + \
        bytes([0, 0, 0, 2]) + extra + bytes([3])
    slide = _ext(SEQ_CONFIG, Level.SEQUENCE, t, "_slide") + bytes([1])  # one table, one token
    free = _opcode(SEQ_CONFIG, Level.SEQUENCE, t, "_table_free")
    return SEQ_CONFIG + allocate + slide + free


def test_a_sliding_window_drops_a_block(bundled: Target) -> None:
    result = _run(_window_input(bundled), bundled, Level.SEQUENCE)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.TableAllocate((2, 3), window=1),
                              ops.TableAppend(0, (1,), 0, 2), ops.TableFree(0)]
    assert isinstance(result.outcomes[1].value, int)  # the null block's id


def test_null_block_freed_fails() -> None:
    target = load_target("tests.zoo.v0.broken:null_block_freed")
    result = _run(_window_input(target), target, Level.SEQUENCE)
    assert result.violation is not None
    assert result.violation.family in {Family.FREE, Family.LEAK, Family.RC}


def test_a_tracker_starts_and_tracks_a_sequence(bundled: Target) -> None:
    """The tracker production creates the trackers; its follow-up adds a sequence."""
    extra = b"\x00" if bundled.caps.extra_keys and bundled.caps.vllm_api else b""
    data = (SEQ_CONFIG + _opcode(SEQ_CONFIG, Level.SEQUENCE, bundled, "_table_allocate")
            + bytes([0, 0, 2]) + extra
            + _ext(SEQ_CONFIG, Level.SEQUENCE, bundled, "_tracker", trackers=True))
    result = _run(data, bundled, Level.SEQUENCE)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.TableAllocate((2,)), ops.TrackerStart(), ops.SeqTrack(0)]


def test_no_tracker_operations_for_a_target_without_trackers(
        bundled: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FamilyAdapter, "tracker_module", lambda self: None)
    rng = random.Random(5)
    kinds: set[str] = set()
    for _ in range(150):
        result = _run(rng.randbytes(96), bundled, Level.SEQUENCE)
        assert result.violation is None, str(result.violation)
        kinds |= {op.kind for op in result.program}
    assert "table_slots" in kinds
    assert not kinds & TRACKER_KINDS


def _malformed_input(t: Target) -> bytes:
    """``allocate_immutable_block`` with its tokens replaced by four ``True``s."""
    decoder = Decoder(WITH_CPU, Level.BLOCK, t.caps)
    pair = decoder.malformable.index((ops.AllocateImmutable, "tokens"))
    return (WITH_CPU + _ext(WITH_CPU, Level.BLOCK, t, "_malformed") + bytes([pair])
            + _immutable(t, (1, 2, 3, 0))[1:] + bytes([4]))


def test_a_malformed_argument_is_refused(bundled: Target) -> None:
    result = _run(_malformed_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.Malformed(ops.AllocateImmutable(None, (1, 2, 3, 0)),
                                            "tokens", (True,) * 4)]
    assert result.outcomes[0].error is ErrorKind.MISUSE


def test_coerced_tokens_fail() -> None:
    target = load_target("tests.zoo.v0.argument_mutants:tokens_coerced")
    result = _run(_malformed_input(target), target)
    assert result.violation is not None
    assert result.violation.family is Family.ATOMIC


# --------------------------------------------------------------------------- round-2 ops


def _block_info_input(t: Target) -> bytes:
    """An immutable GPU block and a fork of it (one id, two holders), then the refcount and
    device of both handles (the shared one first: flag byte 0, pick byte 0; then one more)."""
    return (WITH_CPU + _immutable(t, (1, 2, 3, 0))
            + _opcode(WITH_CPU, Level.BLOCK, t, "_fork")
            + _ext(WITH_CPU, Level.BLOCK, t, "_block_info", block_info=True) + bytes([0, 0, 1]))


def test_block_info_counts_every_holder(bundled: Target) -> None:
    result = _run(_block_info_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[1:] == [ops.Fork(0), ops.BlockInfo((0, 1))]
    assert [refcount for refcount, _ in result.outcomes[2].value] == [2, 2]


def test_refcount_caps_at_one_fails() -> None:
    target = load_target("tests.zoo.v0.broken:refcount_caps_at_one")
    result = _run(_block_info_input(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.RC, 2)


def _null_write_input(t: Target) -> bytes:
    """A sliding-window table (window 1) of tokens 2 3; the null-block-write production finds
    no null block yet, so it slides the window first (one token, 1), which takes it, and its
    follow-up appends to the null block (action byte 0)."""
    extra = b"\x00" if t.caps.extra_keys and t.caps.vllm_api else b""
    allocate = _ext(SEQ_CONFIG, Level.SEQUENCE, t, "_table_allocate_windowed") + \
        bytes([0, 0, 0, 2]) + extra + bytes([3])
    return (SEQ_CONFIG + allocate + _ext(SEQ_CONFIG, Level.SEQUENCE, t, "_null_block_misuse",
               trackers=True)
            + bytes([1, 0]))


def test_a_write_to_the_null_block_is_refused(bundled: Target) -> None:
    result = _run(_null_write_input(bundled), bundled, Level.SEQUENCE)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.TableAllocate((2, 3), window=1),
                              ops.TableAppend(0, (1,), 0, 2), ops.NullBlockMisuse("append")]
    assert result.outcomes[2].error is ErrorKind.MISUSE


def test_null_block_writable_fails() -> None:
    target = load_target("tests.zoo.v0.broken:null_block_writable")
    result = _run(_null_write_input(target), target, Level.SEQUENCE)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.TABLE, 2)


def test_the_null_block_is_queried_once_taken(bundled: Target) -> None:
    extra = b"\x00" if bundled.caps.extra_keys and bundled.caps.vllm_api else b""
    data = (SEQ_CONFIG + _ext(SEQ_CONFIG, Level.SEQUENCE, bundled, "_table_allocate_windowed")
            + bytes([0, 0, 0, 2]) + extra + bytes([3])
            + _ext(SEQ_CONFIG, Level.SEQUENCE, bundled, "_null_block_query",
               trackers=True) + bytes([1, 1]))
    result = _run(data, bundled, Level.SEQUENCE)
    assert result.violation is None, str(result.violation)
    assert result.program[2] == ops.NullBlockQuery(1.0)
    assert result.outcomes[2].value["block_id"] == result.outcomes[1].value


def test_reallocating_a_live_table_is_refused(bundled: Target) -> None:
    extra = b"\x00" if bundled.caps.extra_keys and bundled.caps.vllm_api else b""
    data = (SEQ_CONFIG + _opcode(SEQ_CONFIG, Level.SEQUENCE, bundled, "_table_allocate")
            + bytes([0, 0, 2]) + extra
            + _ext(SEQ_CONFIG, Level.SEQUENCE, bundled, "_table_reallocate",
               trackers=True) + bytes([0, 3]))
    result = _run(data, bundled, Level.SEQUENCE)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.TableAllocate((2,)), ops.TableReallocate(0, (3,))]
    assert result.outcomes[1].error is ErrorKind.MISUSE


SALT_A, SALT_B = ops.ExtraKey(cache_salt="a"), ops.ExtraKey(cache_salt="b")


def _salted_input(t: Target) -> bytes:
    """The same tokens twice as immutable GPU blocks starting chains, under the cache salts
    "a" and "b": different keys, so the second must not hit the first."""
    extras = extras_for(t.caps, adversarial=False)

    def block(key: ops.ExtraKey, prev: bytes) -> bytes:
        return (_opcode(WITH_CPU, Level.BLOCK, t, "_allocate_immutable") + prev + b"\x00"
                + bytes([extras.index(key), NO_HIT, 1, 2, 3, 0]))
    return WITH_CPU + block(SALT_A, b"") + block(SALT_B, b"\x00")


def test_different_salts_never_share_a_block(bundled: Target) -> None:
    result = _run(_salted_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.AllocateImmutable(None, (1, 2, 3, 0), Dev.GPU, SALT_A),
                              ops.AllocateImmutable(None, (1, 2, 3, 0), Dev.GPU, SALT_B)]


def test_extra_key_ignores_salt_fails() -> None:
    target = load_target("tests.zoo.v0.broken:extra_key_ignores_salt")
    result = _run(_salted_input(target), target)
    assert result.violation is not None
    assert result.violation.step == 1


def test_extra_keys_only_with_fields_the_target_folds_in(bundled: Target) -> None:
    """A target whose extra-key function folds in LoRA ids only draws no salted or
    multimodal keys; the ints and ``None`` stay."""
    caps = replace(bundled.caps, extra_key_fields=frozenset({"lora"}))
    for adversarial in (False, True):
        extras = extras_for(caps, adversarial=adversarial)
        keys = [e for e in extras if isinstance(e, ops.ExtraKey)]
        assert keys and all(k.fields_used == {"lora"} for k in keys)
        assert None in extras and any(isinstance(e, int) for e in extras)


# --------------------------------------------------------------------------- stale ids


def _stale_mark_input(t: Target) -> bytes:
    """A two-block GPU chain (count byte 1: two chunks) freed first block first; the stale
    mark production marks the deeper block's old id (size byte 0: one handle; pick byte 1),
    then its follow-up drains the GPU pool (flag byte 0; tick byte 0: now 1.0; one eviction
    beyond the hashless ids): the first eviction must take the other id."""
    extra = b"\x00" if t.caps.extra_keys and t.caps.vllm_api else b""
    chain = (_opcode(WITH_CPU, Level.BLOCK, t, "_allocate_chain") + b"\x00" + extra
             + bytes([1, NO_HIT, 1, 2, 3, 0, 2, 2, 2, 2]))
    free = _opcode(WITH_CPU, Level.BLOCK, t, "_free")
    return (WITH_CPU + chain + free + b"\x00" + free  # one live block left: no pick byte
            + _ext(WITH_CPU, Level.BLOCK, t, "_mark_stale", block_info=True) + bytes([0, 1, 0, 0]))


def test_a_stale_mark_moves_a_freed_id_in_the_lru_order(bundled: Target) -> None:
    result = _run(_stale_mark_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[1:4] == [ops.Free(0), ops.Free(1), ops.MarkStaleIds((1,), 1.0)]
    assert all(op == ops.AllocateMutable(None, Dev.GPU) for op in result.program[4:])
    assert len(result.program) == 4 + (MAX_GPU_BLOCKS - 2) + 1  # hashless ids, one eviction


def test_stale_mark_skips_evictor_fails() -> None:
    target = load_target("tests.zoo.v0.broken:stale_mark_skips_evictor")
    result = _run(_stale_mark_input(target), target)
    assert result.violation is not None
    assert result.violation.family is Family.LRU
    # The missed update shows at the mark itself, in the evictor's rank inputs
    # (models.families.v0.checks._evictable_ranks), before any eviction acts on it.
    step = result.violation.step
    assert step is not None and result.program[step] == ops.MarkStaleIds((1,), 1.0)


def _shared_swap_input(t: Target) -> bytes:
    """A one-token GPU block and its fork (one partial id, two handles), then both swapped
    to the CPU in one call (pick byte 0; flag byte 255: the handles, not their chains)."""
    return (WITH_CPU + _opcode(WITH_CPU, Level.BLOCK, t, "_allocate_mutable") + b"\x00"
            + _opcode(WITH_CPU, Level.BLOCK, t, "_append") + bytes([0, 1])
            + _opcode(WITH_CPU, Level.BLOCK, t, "_fork")
            + _ext(WITH_CPU, Level.BLOCK, t, "_swap_shared", block_info=True) + bytes([0, 255]))


def test_handles_sharing_an_id_are_swapped_in_one_call(bundled: Target) -> None:
    result = _run(_shared_swap_input(bundled), bundled)
    assert result.violation is None, str(result.violation)
    assert result.program[-1] == ops.Swap((0, 1), Dev.GPU, Dev.CPU)
    assert len(result.outcomes[-1].value) == 1  # one source id, one pair


def test_swap_splits_shared_ids_fails() -> None:
    target = load_target("tests.zoo.v0.broken:swap_splits_shared_ids")
    result = _run(_shared_swap_input(target), target)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.SWAP, 3)


def _tracker_edit_input(t: Target) -> bytes:
    """A one-token table, the trackers with it added (flag byte 255: no further tracker
    call), then the computed tracker asked to add it again (tracker byte 0, add flag 0)."""
    extra = b"\x00" if t.caps.extra_keys and t.caps.vllm_api else b""
    return (SEQ_CONFIG + _opcode(SEQ_CONFIG, Level.SEQUENCE, t, "_table_allocate")
            + bytes([0, 0, 2]) + extra
            + _ext(SEQ_CONFIG, Level.SEQUENCE, t, "_tracker", trackers=True) + b"\xff"
            + _ext(SEQ_CONFIG, Level.SEQUENCE, t, "_tracker_edit", trackers=True)
            + bytes([0, 0]))


def test_a_tracker_refuses_a_sequence_it_holds(bundled: Target) -> None:
    result = _run(_tracker_edit_input(bundled), bundled, Level.SEQUENCE)
    assert result.violation is None, str(result.violation)
    assert result.program[-1] == ops.SeqTrackerEdit(0, "computed", True)
    assert result.outcomes[-1].error is ErrorKind.MISUSE


def test_computed_tracker_readds_fails() -> None:
    target = load_target("tests.zoo.v0.broken:computed_tracker_readds")
    result = _run(_tracker_edit_input(target), target, Level.SEQUENCE)
    assert result.violation is not None
    assert (result.violation.family, result.violation.step) == (Family.COMPUTED, 3)
