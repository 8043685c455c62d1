"""Semantics the contract pins down beyond the bug classes: naive allocators, swaps of shared
blocks, forks, and what generators may not ask."""

from __future__ import annotations

from models.families.v0.invariants import Family
from models.families.v0.operations import (
    AllocateImmutable,
    AllocateImmutableChain,
    AllocateMutable,
    Append,
    CountTouched,
    ErrorKind,
    Fork,
    Free,
    MarkAccessed,
    Swap,
    TableAllocate,
    TableEnsureSlots,
    TableSwap,
)

from .trace import CPU, GPU, Trace

F = Family


def test_naive_allocator_never_shares() -> None:
    t = Trace(bs=2, gpu=3, prefix_caching=False)
    t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=2)
    t.do(AllocateImmutable(None, (1, 2)), ids=[1], free=1)
    t.rejects(F.LEAK, AllocateImmutable(None, (1, 2)), ids=[0], free=0)


def test_naive_empty_append_on_a_shared_block_copies() -> None:
    t = Trace(bs=4, gpu=4, prefix_caching=False)
    t.do(AllocateMutable(None), ids=[0], free=3).do(Append(0, (1,))).do(Fork(0))
    t.do(Append(0, ()), moved={0: 1}, cows=[(0, 1)], free=2)
    p = Trace(bs=4, gpu=4)
    p.do(AllocateMutable(None), ids=[0], free=3).do(Append(0, (1,))).do(Fork(0))
    p.rejects(F.COW, Append(0, ()), moved={0: 1}, cows=[(0, 1)], free=2)


def test_naive_blocks_touched() -> None:
    t = Trace(bs=8, gpu=8, prefix_caching=False)
    chunks = tuple(tuple(range(i, i + 8)) for i in (0, 8, 16))
    t.do(AllocateImmutableChain(None, chunks), ids=[0, 1, 2], free=5)
    t.do(CountTouched((0, 1, 2, 0), GPU), value=3)  # ids counted once
    t.do(AllocateMutable(2), ids=[3], free=4).do(Append(3, (1,)))
    for lookahead, want in ((1, 4), (7, 4), (8, 5)):
        t.do(CountTouched((0, 1, 2, 3), GPU, lookahead), value=want)


def test_swap_of_blocks_sharing_an_id() -> None:
    t = Trace(bs=2, gpu=4, cpu=2)
    t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=(3, 2), cached=[0]).do(Fork(0))
    t.do(Swap((0, 1), GPU, CPU), moved={0: 4, 1: 4}, value=[[0, 4]], free=(4, 1),
         evictable=[0], cpu_cached=[4])
    # stale ids (models.families.v0.ops.swap): a target claiming atomicity moves a shared partial
    # id once, both handles on one destination id; without the claim (docs/API.md §4.5 splits
    # them) such a swap is out of contract
    t = Trace(bs=2, gpu=4, cpu=2)
    t.do(AllocateMutable(None), ids=[0], free=(3, 2)).do(Append(0, (1,))).do(Fork(0))
    t.do(Swap((0, 1), GPU, CPU), moved={0: 4, 1: 4}, value=[[0, 4]], free=(4, 1))
    t = Trace(bs=2, gpu=4, cpu=2, atomic=False)
    t.do(AllocateMutable(None), ids=[0], free=(3, 2)).do(Append(0, (1,))).do(Fork(0))
    assert t.oracle.contract_error(Swap((0, 1), GPU, CPU)) is not None


def test_swap_needs_free_destination_ids_all_or_nothing() -> None:
    t = Trace(bs=1, gpu=2, cpu=1)
    t.do(AllocateImmutableChain(None, ((1,), (2,))), ids=[0, 1], free=(0, 1), cached=[0, 1])
    assert t.oracle.would_fail_no_free(Swap((0, 1), GPU, CPU))
    t.do(Swap((0, 1), GPU, CPU), error=ErrorKind.NO_FREE_BLOCKS)


def test_forking_a_chain_with_a_freed_block_is_misuse() -> None:
    t = Trace(bs=1, gpu=3)
    t.do(AllocateImmutableChain(None, ((1,), (2,))), ids=[0, 1], free=1, cached=[0, 1])
    t.do(Free(0), free=2, evictable=[0])
    assert t.oracle.is_misuse(Fork(1)) and t.oracle.chain_of(1) == [1]


def test_contract_for_devices() -> None:
    t = Trace(bs=2, gpu=2, cpu=2)
    t.do(TableAllocate((1,), CPU), table=(2,), free=(2, 1))
    assert t.oracle.contract_error(TableEnsureSlots(0, 4)) is not None  # CPU tables
    assert t.oracle.is_misuse(TableSwap(0, GPU, CPU))
    t.do(AllocateMutable(None, CPU), ids=[3], free=(2, 0))
    assert t.oracle.is_misuse(MarkAccessed((0,), 1.0))
    assert t.oracle.contract_error(Append(0, (1,))) is not None  # appends are GPU only
