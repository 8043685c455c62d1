"""The oracle's contract handling, queries, pinned upstream examples (docs/API.md §11) and
hidden choices."""

from __future__ import annotations

import pytest

from models.core.invariants import Violation
from models.families.v0.capabilities import Generation
from models.families.v0.invariants import Family
from models.families.v0.operations import (
    AllocateImmutable,
    AllocateImmutableChain,
    AllocateMutable,
    Append,
    CachedPrefix,
    ClearCopyOnWrites,
    ComputedBlockIds,
    CountFullTouched,
    CountTouched,
    ErrorKind,
    Free,
    GetNullBlock,
    HitRate,
    MarkComputed,
    Outcome,
    ResetPrefixCache,
    Swap,
    TableAllocate,
    TableAppend,
    TableEnsureSlots,
    TableFork,
    TableFree,
    TableMarkAccessed,
    TableSwap,
)
from models.families.v0.oracle import Inconclusive, OutOfContract

from .trace import CPU, GPU, Trace

F = Family
MISUSE, NO_FREE = ErrorKind.MISUSE, ErrorKind.NO_FREE_BLOCKS


# ---------------------------------------------------------------------- contract


def test_misuse_must_raise_a_typed_error_and_change_nothing() -> None:
    t = Trace(bs=2, gpu=2)
    t.do(AllocateMutable(None), ids=[0], free=1).do(Free(0), free=2)
    t.do(Free(0), error=MISUSE)
    t.rejects(F.LEAK, Free(0))  # a double free accepted
    t = Trace(bs=2, gpu=2)
    t.do(AllocateMutable(None), ids=[0], free=1).do(Free(0), free=2)
    t.rejects(F.CRASH, Free(0), error=ErrorKind.ASSERTION)
    t = Trace(bs=2, gpu=2)
    t.do(AllocateMutable(None), ids=[0], free=1).do(Free(0), free=2)
    t.rejects(F.ATOMIC, Free(0), error=MISUSE, free=3)


@pytest.mark.parametrize("op", [AllocateImmutable(None, (1,)), Append(0, (1, 2, 3)),
                                AllocateImmutable(0, (1, 2)), Swap((0,), CPU, GPU)])
def test_misuse_cases(op: object) -> None:
    t = Trace(bs=2, gpu=2, cpu=1)
    t.do(AllocateMutable(None), ids=[0], free=(1, 1))
    assert t.oracle.is_misuse(op)  # type: ignore[arg-type]
    t.do(op, error=MISUSE)  # type: ignore[arg-type]


def test_misuse_without_typed_errors_is_out_of_contract() -> None:
    t = Trace(bs=2, gpu=2, typed_errors=False)
    t.do(AllocateMutable(None), ids=[0], free=1).do(Free(0), free=2)
    with pytest.raises(OutOfContract):
        t.do(Free(0), error=ErrorKind.ASSERTION)


@pytest.mark.parametrize("op", [Free(7), AllocateMutable(0), Append(9, (1,)),
                                ComputedBlockIds((0,))])
def test_out_of_contract(op: object) -> None:
    t = Trace(bs=2, gpu=2, generation=Generation.VLLM)
    t.do(AllocateMutable(None), ids=[0], free=1)
    assert t.oracle.contract_error(op) is not None  # type: ignore[arg-type]
    with pytest.raises(OutOfContract):
        t.oracle.step(op, Outcome(), t.snapshot())  # type: ignore[arg-type]


def test_failures_of_a_target_without_atomicity_end_the_run() -> None:
    t = Trace(bs=2, gpu=1, atomic=False)
    t.do(AllocateMutable(None), ids=[0], free=0)
    assert t.oracle.would_fail_no_free(AllocateMutable(None))
    with pytest.raises(OutOfContract):
        t.do(AllocateMutable(None), error=NO_FREE)


def test_an_operation_that_must_fail_or_succeed() -> None:
    t = Trace(bs=2, gpu=1)
    t.do(AllocateMutable(None), ids=[0], free=0)
    t.rejects(F.FREE, AllocateMutable(None), ids=[0])
    t = Trace(bs=2, gpu=1)
    t.rejects(F.FREE, AllocateMutable(None), error=NO_FREE)
    t = Trace(bs=2, gpu=1)
    t.rejects(F.CRASH, AllocateMutable(None), error=ErrorKind.UNEXPECTED)


# ---------------------------------------------------------------------- queries


def test_queries_for_generators() -> None:
    t = Trace(bs=2, gpu=4)
    t.do(AllocateImmutableChain(None, ((1, 2), (3, 4))), ids=[0, 1], free=2, cached=[0, 1])
    t.do(AllocateMutable(1), ids=[2], free=1).do(Append(2, (5,)))
    o = t.oracle
    assert o.live_blocks() == [0, 1, 2] and o.chain_of(2) == [0, 1, 2]
    assert o.is_hashed(1) and not o.is_hashed(2) and not o.is_full(2)
    assert o.appendable(2) and not o.appendable(1) and not o.last_in_chain(1)
    assert o.tokens_of(2) == (5,) and o.extra_of(0) is None and o.device_of(2) is GPU
    assert o.hit_candidates(None, GPU, None) == [(1, 2)]
    assert o.hit_candidates(0, GPU, None) == [(3, 4)] and o.hit_candidates(0, GPU, 1) == []
    assert o.cached_contents(GPU) == [((1, 2), None), ((1, 2, 3, 4), None)]
    assert o.free_count(GPU) == 1
    assert not o.would_fail_no_free(AllocateImmutable(None, (1, 2)))  # an active hit
    assert not o.would_fail_no_free(AllocateMutable(None))
    t.do(AllocateMutable(None), ids=[3], free=0)
    assert o.would_fail_no_free(AllocateMutable(None))
    assert o.would_fail_no_free(AllocateImmutable(None, (7, 7)))
    assert not o.would_fail_no_free(AllocateImmutable(None, (1, 2)))


# ---------------------------------------------------------------------- pinned examples


def test_hit_rate() -> None:
    t = Trace(bs=2, gpu=4)
    t.do(HitRate(GPU), value=0.0)
    t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=3, cached=[0]).do(HitRate(GPU), value=0.0)
    t.do(AllocateImmutable(None, (1, 2)), ids=[0]).do(HitRate(GPU), value=0.5)
    t.rejects(F.HIT, HitRate(GPU), value=1.0)
    naive = Trace(bs=2, gpu=2, prefix_caching=False)
    naive.do(HitRate(GPU), value=-1.0)


def test_touched_versus_computed() -> None:
    t = Trace(bs=2, gpu=8)
    chunks = ((1, 1), (2, 2), (3, 3), (4, 4))
    t.do(AllocateImmutableChain(None, chunks), ids=[0, 1, 2, 3], free=4, cached=range(4))
    t.do(AllocateImmutableChain(None, chunks), ids=[0, 1, 2, 3])
    t.do(ComputedBlockIds((0, 1, 2, 3), skip_last=False), value=[])
    t.do(MarkComputed())
    t.do(ComputedBlockIds((4, 5, 6, 7), skip_last=False), value=[0, 1, 2, 3])
    t.do(ComputedBlockIds((4, 5, 6, 7)), value=[0, 1, 2])
    t.rejects(F.COMPUTED, ComputedBlockIds((0, 1, 2, 3), skip_last=False), value=[0])


def test_find_cached_blocks_prefix() -> None:
    t = Trace(bs=2, gpu=4, generation=Generation.VLLM)
    t.do(AllocateImmutableChain(None, ((1, 1), (2, 2))), ids=[0, 1], free=2, cached=[0, 1])
    t.do(CachedPrefix((0, 1)), value=[])
    t.do(MarkComputed())
    hashes = [t.chain_hash(0), t.chain_hash(1)]
    t.do(CachedPrefix((0, 1)), value=hashes)
    t.rejects(F.COMPUTED, CachedPrefix((0, 1)), value=hashes[:1])


def test_blocks_touched_by_a_swap_in() -> None:
    t = Trace(bs=8, gpu=4, cpu=4)
    chunks = tuple(tuple(range(i, i + 8)) for i in (0, 8, 16))
    t.do(AllocateImmutableChain(None, chunks), ids=[0, 1, 2], free=(1, 4), cached=[0, 1, 2])
    t.do(AllocateImmutableChain(None, chunks, CPU), ids=[4, 5, 6], free=(1, 1),
         cpu_cached=[4, 5, 6])
    t.do(CountTouched((0, 1, 2), CPU), value=0)
    t.do(Free(3), free=(1, 2), cpu_evictable=[4])
    t.do(CountTouched((0, 1, 2), CPU), value=1)
    t.do(AllocateMutable(2), ids=[3], free=(0, 2)).do(Append(6, (1,)))
    for lookahead, want in ((1, 2), (7, 2), (8, 3)):
        t.do(CountTouched((0, 1, 2, 6), CPU, lookahead), value=want)
    t.rejects(F.FREE, CountTouched((0, 1, 2, 6), CPU, 8), value=2)


def test_full_blocks_touched_naive_and_cached() -> None:
    t = Trace(bs=2, gpu=4, generation=Generation.VLLM)
    t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=3, cached=[0])
    t.do(AllocateMutable(0), ids=[1], free=2).do(Append(1, (3,)))
    t.do(CountFullTouched((0, 1), GPU), value=0)
    naive = Trace(bs=2, gpu=4, prefix_caching=False, generation=Generation.VLLM)
    naive.do(AllocateImmutable(None, (1, 2)), ids=[0], free=3)
    naive.do(CountFullTouched((0, 0), GPU), value=1)


def test_reset_prefix_cache() -> None:
    t = Trace(bs=2, gpu=2, generation=Generation.VLLM)
    t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=1, cached=[0])
    t.do(ResetPrefixCache(), value=False)
    t.do(Free(0), free=2, evictable=[0])
    t.do(ResetPrefixCache(GPU), value=True, cached=[], evictable=[])
    t.do(HitRate(GPU), value=0.0)
    t.do(AllocateImmutable(None, (1, 2)), ids=[1], free=1, cached=[1])  # a miss now
    t.rejects(F.CACHE, ResetPrefixCache(), value=True)


def test_null_block() -> None:
    t = Trace(bs=2, gpu=2, generation=Generation.VLLM)
    t.do(GetNullBlock(), ids=[0], value=0, free=1).do(GetNullBlock(), value=0)
    t.do(ResetPrefixCache(), value=False)
    t.rejects(F.LEAK, AllocateMutable(None), ids=[0], free=0)


def test_clear_copy_on_writes_is_empty_after_every_drain() -> None:
    t = Trace(bs=2, gpu=2)
    t.do(ClearCopyOnWrites(), value=[])
    t.rejects(F.COW, ClearCopyOnWrites(), value=[[0, 1]])


# ---------------------------------------------------------------------- sequences


def test_table_copy_on_write_after_fork() -> None:
    t = Trace(bs=8, gpu=8)
    prompt = tuple(range(10))
    t.do(TableAllocate(prompt), table=(0, 1), free=6, cached=[0])
    t.do(TableFork(0))
    t.do(TableAppend(1, (20, 21, 22)), table=(0, 2), cows=[(1, 2)], free=5)  # 8 - (2+2-1)
    t.do(TableFree(0), free=6).do(TableFree(1), free=8, evictable=[0])


def test_table_append_fills_promotes_and_deduplicates() -> None:
    t = Trace(bs=2, gpu=4)
    t.do(TableAllocate((1, 2, 3, 4)), table=(0, 1), free=2, cached=[0, 1])
    t.do(TableAllocate((1, 2, 3)), table=(0, 2), free=1)
    t.do(TableAppend(1, (4, 5), lookahead=1), table=(0, 1, 3), free=1)  # 2 -> dedup onto 1
    t.do(TableEnsureSlots(1, 2), table=(0, 1, 3, 2), free=0)
    t.rejects(F.FREE, TableEnsureSlots(1, 4), table=(0, 1, 3, 2, 4))


def test_table_swap_admission_must_be_sound() -> None:
    def trace() -> Trace:
        t = Trace(bs=2, gpu=2, cpu=1)
        t.do(TableAllocate((1, 2, 3, 4)), table=(0, 1), free=(0, 1), cached=[0, 1])
        return t
    trace().do(TableSwap(0, GPU, CPU), error=NO_FREE, admitted=False)
    trace().rejects(F.FREE, TableSwap(0, GPU, CPU), error=NO_FREE, admitted=True)
    trace().rejects(F.ATOMIC, TableSwap(0, GPU, CPU), error=NO_FREE, admitted=False,
                    free=(2, 0), evictable=[0, 1])


def test_table_swap_out_and_back() -> None:
    t = Trace(bs=2, gpu=2, cpu=2)
    t.do(TableAllocate((1, 2, 3)), table=(0, 1), free=(0, 2), cached=[0])
    t.do(TableSwap(0, GPU, CPU), table=(2, 3), value=[[0, 2], [1, 3]], free=(2, 0),
         evictable=[0], cpu_cached=[2])
    t.do(TableSwap(0, CPU, GPU), table=(0, 1), value=[[2, 0], [3, 1]], free=(0, 2),
         evictable=[], cpu_evictable=[2])


# ---------------------------------------------------------------------- hidden choices


def _hidden_eviction(introspect: bool) -> Trace:
    """Ids 2 and 3 tie for eviction; a new block takes one and is then promoted onto id 1, so
    the victim is never shown."""
    t = Trace(bs=1, gpu=4, introspect=introspect)
    t.do(TableAllocate((1,)), table=(0,), free=3, cached=[0])
    t.do(TableAllocate((1, 2)), table=(0, 1), free=2, cached=[0, 1])
    t.do(TableAllocate((5,)), table=(2,), free=1, cached=[0, 1, 2])
    t.do(TableAllocate((6,)), table=(3,), free=0, cached=[0, 1, 2, 3])
    t.do(TableFree(2), free=1, evictable=[2]).do(TableFree(3), free=2, evictable=[2, 3])
    return t


def test_hidden_victim_is_explored_then_resolved() -> None:
    t = _hidden_eviction(introspect=False)
    t.do(TableAppend(0, (2,)), table=(0, 1), free=2)
    assert len(t.oracle.worlds) == 2
    t.do(TableAllocate((5,)), table=(2,), free=1)  # a hit iff id 3 was the victim
    t.do(HitRate(GPU), value=2 / 6)
    assert len(t.oracle.worlds) == 1
    t = _hidden_eviction(introspect=False)
    t.do(TableAppend(0, (2,)), table=(0, 1), free=2)
    t.rejects(F.HIT, HitRate(GPU), value=0.5)


def test_hidden_victim_settled_by_introspection() -> None:
    t = _hidden_eviction(introspect=True)
    t.do(TableAppend(0, (2,)), table=(0, 1), free=2, cached=[0, 1, 3], evictable=[3])
    assert len(t.oracle.worlds) == 1
    t = _hidden_eviction(introspect=True)
    t.rejects(F.CACHE, TableAppend(0, (2,)), table=(0, 1), free=2, evictable=[])


def test_a_pruned_search_is_inconclusive_not_a_violation() -> None:
    assert issubclass(Inconclusive, OutOfContract)
    t = Trace(bs=1, gpu=12, introspect=False, lru=False)
    t.do(TableAllocate((1,)), table=(0,), free=11)
    t.do(TableAllocate((1, 2)), table=(0, 1), free=10)
    for k in range(10):
        t.do(TableAllocate((10 + k,)), table=(2 + k,), free=9 - k)
    for k in range(10):
        t.do(TableFree(2 + k), free=1 + k)
    t.do(TableAppend(0, (2,)), table=(0, 1), free=10)  # any of ten victims, never shown
    assert t.oracle.pruned and len(t.oracle.worlds) == 8
    with pytest.raises(Inconclusive):
        t.do(HitRate(GPU), value=0.99)


@pytest.mark.parametrize("introspect", [False, True])
def test_wrong_victim_of_a_block_that_may_hide_its_id(introspect: bool) -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=1, gpu=4, introspect=introspect)
        t.do(TableAllocate((1,)), table=(0,), free=3, cached=[0])
        t.do(TableAllocate((5,)), table=(1,), free=2, cached=[0, 1])
        t.do(TableAllocate((6,)), table=(2,), free=1, cached=[0, 1, 2])
        t.do(TableAllocate((7,)), table=(3,), free=0, cached=[0, 1, 2, 3])
        t.do(TableMarkAccessed(1, 1.0)).do(TableMarkAccessed(2, 2.0))
        t.do(TableFree(1), free=1, evictable=[1]).do(TableFree(2), free=2, evictable=[1, 2])
        victim, kept = (1, 2) if honest else (2, 1)
        t.do(TableAppend(0, (9,)), table=(0, victim), free=1, cached=[0, 3, victim, kept][:4],
             evictable=[kept])
    run(True)
    with pytest.raises(Violation) as info:
        run(False)
    assert info.value.family is F.LRU, str(info.value)


@pytest.mark.parametrize("hashless", [False, True])
def test_a_wrong_victim_is_reported_as_itself_not_as_a_knock_on_leak(hashless: bool) -> None:
    """The target evicts the younger id first, then the one due: the model follows its victim
    (fresh_ids), so the second block's id is no second owner and the finding is the first
    wrong eviction (LRU; CACHE while a hashless id was still free)."""
    t = Trace(bs=1, gpu=4 if hashless else 3)
    t.do(TableAllocate((1,)), table=(0,), free=2 + hashless, cached=[0])
    t.do(TableAllocate((2,)), table=(1,), free=1 + hashless, cached=[0, 1])
    t.do(TableAllocate((3,)), table=(2,), free=hashless, cached=[0, 1, 2])
    t.do(TableMarkAccessed(0, 1.0)).do(TableMarkAccessed(1, 2.0))
    t.do(TableFree(0), free=1 + hashless, evictable=[0])
    t.do(TableFree(1), free=2 + hashless, evictable=[0, 1])
    seen = {"table": (1, 0), "free": hashless, "cached": [0, 1, 2], "evictable": []}
    if hashless:
        v = t.rejects(F.CACHE, TableAllocate((8, 9, 7)), **{**seen, "table": (1, 0, 3),
                                                              "cached": [0, 1, 2, 3]})
        assert v.observed == 1
    else:
        v = t.rejects(F.LRU, TableAllocate((8, 9)), **seen)
        assert (v.expected, v.observed) == ([0], 1), str(v)


def test_the_due_victims_in_order_pass() -> None:
    """The honest order of the same step (the control of the test above)."""
    t = Trace(bs=1, gpu=3)
    t.do(TableAllocate((1,)), table=(0,), free=2, cached=[0])
    t.do(TableAllocate((2,)), table=(1,), free=1, cached=[0, 1])
    t.do(TableAllocate((3,)), table=(2,), free=0, cached=[0, 1, 2])
    t.do(TableMarkAccessed(0, 1.0)).do(TableMarkAccessed(1, 2.0))
    t.do(TableFree(0), free=1, evictable=[0]).do(TableFree(1), free=2, evictable=[0, 1])
    t.do(TableAllocate((8, 9)), table=(0, 1), free=0, cached=[0, 1, 2], evictable=[])
