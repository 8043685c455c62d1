"""The model's semantics for sliding-window tables, a table's slot read-outs, the id space and
the swap log (``models.families.v0.window``, ``models.families.v0.ops.table_queries``): honest
traces pass, each broken
read-out is rejected with its family."""

from __future__ import annotations

import pytest

from models.core.invariants import Violation
from models.families.v0.invariants import Family
from models.families.v0.operations import (
    ErrorKind,
    IdSpace,
    NullBlockMisuse,
    NullBlockQuery,
    SwapLog,
    TableAllocate,
    TableAppend,
    TableEnsureSlots,
    TableFork,
    TableFree,
    TableReallocate,
    TableSlots,
    TableSwap,
)
from tests.model.judged import run_judged

from .trace import CPU, GPU, Trace

F = Family


def _windowed(**caps: bool) -> Trace:
    """Block size 2, 5 GPU ids: a window-1 table of 5 tokens on ids 0, 1, 2."""
    t = Trace(bs=2, gpu=5, introspect=False, **caps)
    return t.do(TableAllocate((1, 2, 3, 4, 5), window=1), table=(0, 1, 2), free=2)


def _slide(t: Trace, **seen: object) -> Trace:
    """Append token 6 with 5 computed slots: block 0 leaves the window (5 // 2 - 1 = 1)."""
    t.ttokens[0] = (3, 4, 5)  # the table no longer shows the dropped block's tokens
    return t.do(TableAppend(0, (6,), computed=5), **seen)  # type: ignore[arg-type]


def test_window_drop_frees_the_block_and_shows_the_null_block() -> None:
    # Null block on id 3 (free 2 -> 1); the dropped block goes back (cached: evictable).
    t = _slide(_windowed(), table=(3, 1, 2), value=3, free=2)
    assert t.oracle.model.null_id == 3
    # Sliding again: block 1 leaves the window, the null block is not taken twice.
    t.ttokens[0] = (5, 6)
    t.do(TableAppend(0, (7,), computed=6), table=(3, 3, 2, 4), value=3, free=2)
    # Freeing the table keeps the null block: one id stays taken.
    t.do(TableFree(0), free=4)


def test_window_drop_that_keeps_the_block_is_caught() -> None:
    t = _windowed()
    t.ttokens[0] = (3, 4, 5)
    t.rejects(F.FREE, TableAppend(0, (6,), computed=5), table=(3, 1, 2), value=3, free=1)
    t = _windowed()
    t.ttokens[0] = (1, 2, 3, 4, 5)
    t.rejects(F.TABLE, TableAppend(0, (6,), computed=5), table=(0, 1, 2), value=3, free=2)


def test_window_drop_leaking_the_id_is_caught() -> None:
    t = _windowed(prefix_caching=False)
    t.ttokens[0] = (3, 4, 5)
    t.rejects(F.LEAK, TableAppend(0, (6,), computed=5), table=(3, 1, 2), value=3, free=1)


def test_null_block_must_not_change() -> None:
    t = _slide(_windowed(), table=(3, 1, 2), value=3, free=2)
    t.ttokens[0] = (5, 6)
    t.rejects(F.LEAK, TableAppend(0, (7,), computed=6), table=(3, 3, 2, 4), value=4, free=2)


def test_window_contract() -> None:
    t = _windowed()
    # Without num_computed_slots a windowed append is misuse; for other tables it is out.
    assert t.oracle.is_misuse(TableAppend(0, (6,)))
    t.do(TableAppend(0, (6,)), error=ErrorKind.MISUSE, free=2)
    t.rejects(F.TABLE, TableAppend(0, (6,)), table=(0, 1, 2), free=2)
    assert t.oracle.contract_error(TableAppend(0, (6,), computed=-1)) is not None
    assert t.oracle.is_misuse(TableAppend(0, (6,), computed=9))  # past the last block
    assert t.oracle.contract_error(TableAllocate((1,), window=0)) is not None
    plain = Trace(bs=2, gpu=4).do(TableAllocate((1,)), table=(0,), free=3)
    assert plain.oracle.contract_error(TableAppend(0, (2,), computed=1)) is not None
    # A table holding the null block forks and swaps like any table.
    _slide(t, table=(3, 1, 2), value=3, free=2)
    assert t.oracle.contract_error(TableFork(0)) is None
    assert t.oracle.contract_error(TableSwap(0, GPU, CPU)) is None


def test_window_append_needs_a_free_id_for_the_null_block_first() -> None:
    t = Trace(bs=2, gpu=3, introspect=False)
    t.do(TableAllocate((1, 2, 3, 4, 5), window=1), table=(0, 1, 2), free=0)
    # The drop would give an id back, but the null block is taken before anything is freed.
    assert t.oracle.would_fail_no_free(TableAppend(0, (6,), computed=5))
    t.do(TableAppend(0, (6,), computed=5), error=ErrorKind.NO_FREE_BLOCKS, free=0)


def test_table_slots() -> None:
    t = Trace(bs=2, gpu=4, introspect=False)
    t.do(TableAllocate((1, 2, 3, 4, 5)), table=(0, 1, 2), free=1)
    # 5 full slots; 3 unseen + 2 lookahead from slot 5 (1 empty slot): 1 + cdiv(4, 2) = 3.
    want = {"full_slots": 5, "unseen": [7, 8, 9], "touched": 3}
    t.do(TableSlots(0, (1, 2, 3, 4, 5, 7, 8, 9), 2), value=want)
    t.rejects(F.FREE, TableSlots(0, (1, 2, 3, 4, 5, 7, 8, 9), 2), value={**want, "touched": 2})
    t.rejects(F.TABLE, TableSlots(0, (1, 2, 3, 4, 5), 0),
              value={"full_slots": 5, "unseen": [5], "touched": 1})


def test_slots_count_dropped_tokens() -> None:
    t = _slide(_windowed(), table=(3, 1, 2), value=3, free=2)
    t.do(TableSlots(0, (1, 2, 3, 4, 5, 6, 7), 0),
         value={"full_slots": 6, "unseen": [7], "touched": 1})


def test_id_space() -> None:
    t = Trace(bs=2, gpu=3, cpu=2)
    every = [0, 1, 2, 3, 4]
    t.do(IdSpace(CPU, (3, 4)), value={"total": 2, "all": every, "physical": [0, 1]})
    t.do(IdSpace(GPU, (2, 0)), value={"total": 3, "all": every, "physical": [2, 0]})
    t.rejects(F.SWAP, IdSpace(CPU, (3, 4)), value={"total": 2, "all": every, "physical": [3, 4]})
    t.rejects(F.FREE, IdSpace(CPU, ()), value={"total": 5, "all": every, "physical": []})
    t.rejects(F.LEAK, IdSpace(CPU, ()), value={"total": 2, "all": [0, 1, 2], "physical": []})
    assert t.oracle.contract_error(IdSpace(GPU, (3,))) is not None


def test_swap_log_since_the_last_reset() -> None:
    t = Trace(bs=2, gpu=3, cpu=3, introspect=False)
    t.do(TableAllocate((1, 2, 3)), table=(0, 1), free=(1, 3))
    t.do(TableSwap(0, GPU, CPU), table=(3, 4), value=[[0, 3], [1, 4]], free=(3, 1),
         admitted=True)
    t.do(TableSwap(0, CPU, GPU), table=(0, 2), value=[[3, 0], [4, 2]], free=(1, 3),
         admitted=True)
    t.do(SwapLog(), value=[[0, 3], [1, 4], [3, 0], [4, 2]])
    t.do(SwapLog(), value=[])
    t.do(TableSwap(0, GPU, CPU), table=(3, 5), value=[[0, 3], [2, 5]], free=(3, 1),
         admitted=True)
    t.rejects(F.SWAP, SwapLog(), value=[[0, 3], [1, 4], [3, 0], [4, 2], [0, 3], [2, 5]])


def test_new_fields_and_ops_round_trip_through_json() -> None:
    from models.families.v0.operations import Dev, op_from_json, op_to_json

    for op in (TableAllocate((1, 2), window=2), TableAppend(0, (1,), 2, 5),
               TableSlots(0, (1, 2), 3), IdSpace(Dev.CPU, (3, 4)), SwapLog(),
               NullBlockQuery(), NullBlockQuery(2.5), NullBlockMisuse("set_id"),
               TableReallocate(1, (4, 5))):
        assert op_from_json(op_to_json(op)) == op
    # Traces written before the window fields still decode.
    old = op_from_json({"op": "table_allocate", "tokens": [1], "device": "gpu",
                        "extra_hash": None})
    assert old == TableAllocate((1,))
    assert op_from_json({"op": "table_append", "table": 0, "tokens": [1],
                         "lookahead": 0}).computed is None


_NULL_READS = {"block_id": 3, "token_ids": [], "num_empty_slots": 2, "is_full": False,
               "no_prev_block": True, "content_hash": None, "extra_hash": None}


def test_null_block_reads_forward_the_empty_block() -> None:
    t = _slide(_windowed(), table=(3, 1, 2), value=3, free=2)
    t.do(NullBlockQuery(), value=_NULL_READS)
    t.do(NullBlockQuery(7.0), value={**_NULL_READS, "computed": False, "last_accessed": 7.0})
    # Targets whose blocks have no extra_hash leave it out.
    t.do(NullBlockQuery(), value={k: v for k, v in _NULL_READS.items() if k != "extra_hash"})
    t.rejects(F.LEAK, NullBlockQuery(), value={**_NULL_READS, "block_id": 4})
    t.rejects(F.TABLE, NullBlockQuery(), value={**_NULL_READS, "token_ids": [1]})
    t.rejects(F.TABLE, NullBlockQuery(), value={**_NULL_READS, "num_empty_slots": 1})
    t.rejects(F.TABLE, NullBlockQuery(), value={**_NULL_READS, "no_prev_block": False})
    t.rejects(F.TABLE, NullBlockQuery(1.0), value={**_NULL_READS, "computed": True,
                                                   "last_accessed": 1.0})
    t.rejects(F.LRU, NullBlockQuery(1.0), value={**_NULL_READS, "computed": False,
                                                 "last_accessed": -1.0})
    # ``free`` of the null block is ignored: a free count that moves is caught.
    t.rejects(F.FREE, NullBlockQuery(), value=_NULL_READS, free=3)


def test_null_block_writes_are_misuse_once_it_exists() -> None:
    t = _windowed()
    for action in ("append", "set_id", "fork", "device_free", "device_fork"):
        assert t.oracle.contract_error(NullBlockMisuse(action)) is not None  # not taken yet
        assert t.oracle.contract_error(NullBlockQuery()) is not None
    _slide(t, table=(3, 1, 2), value=3, free=2)
    for action in ("append", "set_id", "fork", "device_free", "device_fork"):
        assert t.oracle.is_misuse(NullBlockMisuse(action))
        t.do(NullBlockMisuse(action), error=ErrorKind.MISUSE, free=2)
    assert t.oracle.contract_error(NullBlockMisuse("free")) is not None
    t.rejects(F.TABLE, NullBlockMisuse("append"))
    t.rejects(F.CRASH, NullBlockMisuse("fork"), error=ErrorKind.ASSERTION)
    # The GPU allocator releasing the null block's id (upstream frees it by id: the id then
    # goes to a sequence while every windowed table still points at it).
    t.rejects(F.TABLE, NullBlockMisuse("device_free"), free=3)
    t.rejects(F.TABLE, NullBlockMisuse("device_fork"))


def test_table_allocated_twice_is_misuse() -> None:
    t = _windowed()
    assert t.oracle.is_misuse(TableReallocate(0, (1, 2)))
    t.do(TableReallocate(0, (1, 2)), error=ErrorKind.MISUSE)
    t.rejects(F.TABLE, TableReallocate(0, (1, 2)))
    t.do(TableFree(0), free=5)
    # A freed table is empty: allocating it again is not misuse (and not modelled).
    assert t.oracle.contract_error(TableReallocate(0, (1, 2))) is not None


def test_window_past_the_table_or_over_the_written_block_is_misuse() -> None:
    t = _windowed()  # 5 tokens on 3 blocks of 2, window 1
    # 8 computed slots: 8 // 2 - 1 = 3 >= 3 blocks.
    assert t.oracle.is_misuse(TableAppend(0, (), 0, 8))
    t.do(TableAppend(0, (), 0, 8), error=ErrorKind.MISUSE, free=2)
    # With a spare block (4 blocks), 8 computed slots drop blocks 0..2, and token 6 goes
    # into block 2.
    t.do(TableEnsureSlots(0, 3), table=(0, 1, 2, 3), free=1)
    assert t.oracle.is_misuse(TableAppend(0, (6,), 0, 8))
    t.do(TableAppend(0, (6,), 0, 8), error=ErrorKind.MISUSE, free=1)
    t.rejects(F.CRASH, TableAppend(0, (6,), 0, 8), error=ErrorKind.ASSERTION, free=1)
    t.rejects(F.TABLE, TableAppend(0, (6,), 0, 8), table=(3, 3, 3, 0), value=3, free=2)
    # Without tokens, or a drop that ends at the written block, nothing is written over,
    # but the first block kept would not be full: its hash needs the dropped prefix (misuse).
    assert t.oracle.is_misuse(TableAppend(0, (), 0, 8))
    assert t.oracle.is_misuse(TableAppend(0, (6,), 0, 6))


def test_required_blocks_count_lookahead() -> None:
    t = Trace(bs=4, gpu=4, introspect=False)
    t.do(TableAllocate((1, 2, 3, 4, 5)), table=(0, 1), free=2)
    want = {"full_slots": 5, "unseen": [7], "touched": 2, "required": 3}
    t.do(TableSlots(0, (1, 2, 3, 4, 5, 7), 3), value=want)  # cdiv(6 + 3, 4)
    t.do(TableSlots(0, (1, 2, 3, 4, 5, 7), 3), value={**want, "required": 3})
    t.rejects(F.FREE, TableSlots(0, (1, 2, 3, 4, 5, 7), 3), value={**want, "required": 2})
    # Targets whose static method takes no lookahead leave the read-out out.
    del want["required"]
    t.do(TableSlots(0, (1, 2, 3, 4, 5, 7), 3), value=want)


_NULL_TAKEN = [TableAllocate((1, 2, 3, 4, 5), window=1), TableAppend(0, (6,), computed=5)]


@pytest.mark.parametrize("action", ["device_free", "device_fork"])
@pytest.mark.parametrize("allocator_type", ["prefix_caching", "naive"])
def test_the_gpu_allocator_refuses_to_free_or_fork_the_null_block(allocator_type: str,
                                                                   action: str) -> None:
    out, oracle = run_judged([*_NULL_TAKEN, NullBlockMisuse(action)], shape=(2, 5, 2),
                             allocator_type=allocator_type)
    assert out[-1][0] is ErrorKind.MISUSE
    assert oracle.model.null_id is not None


def test_a_gpu_allocator_that_reads_a_missing_owner_is_caught() -> None:
    with pytest.raises(Violation) as found:
        run_judged([*_NULL_TAKEN, NullBlockMisuse("device_free")], shape=(2, 5, 2),
                   spec="tests.zoo.v0.broken:owner_read_without_default")
    assert found.value.family is F.CRASH
