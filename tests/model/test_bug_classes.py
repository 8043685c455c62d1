"""Every example bug class of docs/INVARIANTS.md as a short trace: the broken target is rejected
with the right family, and the honest version of the same trace is accepted."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from models.core.invariants import Invariant
from models.families.v0.invariants import Family
from models.families.v0.operations import (
    AllocateImmutable,
    AllocateImmutableChain,
    AllocateMutable,
    Append,
    ErrorKind,
    Fork,
    Free,
    MarkAccessed,
    Swap,
    TableAllocate,
    TableAppend,
    TableFork,
)

from .trace import CPU, GPU, Trace

F = Family
Step = Callable[[bool], None]  # honest -> run the last step, honestly or not


def both(run: Callable[[bool], object], family: Invariant) -> None:
    """The honest run passes; the broken run raises ``family`` on its last step."""
    run(True)
    with pytest.raises(Exception) as info:
        run(False)
    assert getattr(info.value, "family", None) is family, str(info.value)


def test_duplicate_fill_freed_through_cached_path() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=3)
        t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=2, cached=[0])
        t.do(AllocateMutable(None), ids=[1], free=1)
        # The filled block duplicates id 0's content: id 1 must go back to the hashless pool.
        t.do(Append(1, (1, 2)), moved={1: 0}, free=2, evictable=[] if honest else [1])
    both(run, F.CACHE)


def test_fork_of_a_long_chain_must_work() -> None:
    n = 1100
    def run(honest: bool) -> None:
        t = Trace(bs=1, gpu=n)
        chunks = tuple((i,) for i in range(n))
        t.do(AllocateImmutableChain(None, chunks), ids=list(range(n)), free=0, cached=range(n))
        if honest:
            t.do(Fork(n - 1))
        else:
            t.do(Fork(n - 1), error=ErrorKind.UNEXPECTED)
    both(run, F.TABLE)


def test_evictor_that_assumes_time_order() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=2)
        t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=1, cached=[0])
        t.do(AllocateImmutable(None, (3, 4)), ids=[1], free=0, cached=[0, 1])
        t.do(MarkAccessed((0,), 5.0)).do(MarkAccessed((1,), 1.0))
        t.do(Free(0), free=1, evictable=[0]).do(Free(1), free=2, evictable=[0, 1])
        victim, kept = (1, 0) if honest else (0, 1)  # block 1 was used least recently
        t.do(AllocateMutable(None), ids=[victim], free=1, cached=[kept], evictable=[kept])
    both(run, F.LRU)


def test_table_holding_one_block_twice() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=4)
        t.do(TableAllocate((1, 2)), table=(0,), free=3, cached=[0])
        t.do(TableAppend(0, (3,)), table=(0, 1) if honest else (0, 0), free=2)
    both(run, F.LEAK)


def test_fork_taking_a_double_reference() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=4)
        t.do(TableAllocate((1, 2, 3)), table=(0, 1), free=2, cached=[0])
        t.do(TableFork(0), refcounts=None if honest else {0: 3})
    both(run, F.RC)


def test_hash_ignoring_the_adapter() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=4)
        t.do(AllocateImmutable(None, (1, 2), extra_hash=7), ids=[0], free=3, cached=[0])
        if honest:
            t.do(AllocateImmutable(None, (1, 2), extra_hash=8), ids=[1], free=2, cached=[0, 1])
        else:  # same id, same hash: the extra key never reached the hash
            t.do(AllocateImmutable(None, (1, 2), extra_hash=8), ids=[0],
                 hashes={1: t.chain_hash(0)})
    both(run, F.HASH)


def test_python_hash_collision_poisons_the_cache() -> None:
    evil = 2**61 - 1  # hash(evil) == hash(0)
    def run(honest: bool) -> None:
        t = Trace(bs=1, gpu=4)
        t.do(AllocateImmutable(None, (0,)), ids=[0], free=3, cached=[0])
        if honest:
            t.do(AllocateImmutable(None, (evil,)), ids=[1], free=2, cached=[0, 1])
        else:
            t.do(AllocateImmutable(None, (evil,)), ids=[0], hashes={1: t.chain_hash(0)})
    both(run, F.HASH)


def test_collision_with_an_evictable_block() -> None:
    evil = 2**61 - 1
    def run(honest: bool) -> None:
        t = Trace(bs=1, gpu=4)
        t.do(AllocateImmutable(None, (0,)), ids=[0], free=3, cached=[0])
        t.do(Free(0), free=4, evictable=[0])
        if honest:
            t.do(AllocateImmutable(None, (evil,)), ids=[1], free=3, cached=[0, 1])
        else:  # the colliding evictable block is "hit" and revived
            t.do(AllocateImmutable(None, (evil,)), ids=[0], free=3, evictable=[],
                 hashes={1: t.chain_hash(0)})
    both(run, F.HASH)


def test_eviction_while_hashless_ids_are_free() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=1, gpu=4)
        t.do(AllocateImmutable(None, (0,)), ids=[0], free=3, cached=[0])
        t.do(Free(0), free=4, evictable=[0])
        if honest:
            t.do(AllocateImmutable(None, (5,)), ids=[1], free=3, cached=[0, 1])
        else:
            t.do(AllocateImmutable(None, (5,)), ids=[0], free=3, cached=[0], evictable=[])
    both(run, F.CACHE)


def test_a_pool_too_small_for_a_chain_yet_it_fits_by_false_hits() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=2)
        t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=1, cached=[0])
        op = AllocateImmutableChain(None, ((3, 4), (5, 6)))
        if honest:
            t.do(op, error=ErrorKind.NO_FREE_BLOCKS)
        else:  # (3, 4) "hits" id 0: the hash does not tell the contents apart
            t.do(op, ids=[0, 1], free=0, cached=[0, 1], hashes={1: t.chain_hash(0)})
    both(run, F.HASH)


def test_block_hashed_before_it_is_full() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=2)
        t.do(AllocateMutable(None), ids=[0], free=1)
        if honest:
            t.do(Append(0, (1,)))
        else:
            t.do(Append(0, (1,)), hashes={0: 1234}, cached=[0])
    both(run, F.CACHE)


def test_hit_on_evictable_block_left_in_the_evictor() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=3)
        t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=2, cached=[0])
        t.do(Free(0), free=3, evictable=[0])
        if honest:
            t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=2, evictable=[])
        else:
            t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=3, evictable=[0])
    both(run, F.CACHE)


def test_evictor_entry_at_the_wrong_refcount() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=3)
        t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=2, cached=[0])
        t.do(AllocateImmutable(None, (1, 2)), ids=[0])
        if honest:
            t.do(Free(0))
        else:  # moved to the evictor when the count reached 1
            t.do(Free(0), free=3, evictable=[0])
    both(run, F.CACHE)


def test_eviction_keeps_the_content_map_entry() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=1)
        t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=0, cached=[0])
        t.do(Free(0), free=1, evictable=[0])
        t.do(AllocateMutable(None), ids=[0], free=0, evictable=[], cached=[] if honest else [0])
    both(run, F.CACHE)


@pytest.mark.parametrize("cows", [(), ((1, 0),)], ids=["missing", "reversed"])
def test_copy_on_write_not_recorded(cows: tuple[tuple[int, int], ...]) -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=4, gpu=4)
        t.do(AllocateMutable(None), ids=[0], free=3).do(Append(0, (1,)))
        t.do(Fork(0))
        t.do(Append(0, (2,)), moved={0: 1}, free=2, cows=[(0, 1)] if honest else cows)
    both(run, F.COW)


def test_write_to_shared_block_in_place() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=4, gpu=4)
        t.do(AllocateMutable(None), ids=[0], free=3).do(Append(0, (1,)))
        t.do(Fork(0))
        if honest:
            t.do(Append(0, (2,)), moved={0: 1}, free=2, cows=[(0, 1)])
        else:
            t.do(Append(0, (2,)))
    both(run, F.COW)


@pytest.mark.parametrize("broken", ["mapping", "device"])
def test_swap_reversed(broken: str) -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=2, cpu=2)
        t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=(1, 2), cached=[0])
        moved, value = {0: 2}, [[0, 2]]
        if not honest and broken == "mapping":
            value = [[2, 0]]
        if not honest and broken == "device":
            moved, value = {0: 1}, [[0, 1]]
        t.do(Swap((0,), GPU, CPU), moved=moved, value=value, free=(2, 1), evictable=[0],
             cpu_cached=[2])
    both(run, F.SWAP)


def test_free_count_omits_the_evictor() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=4)
        t.do(AllocateImmutable(None, (1, 2)), ids=[0], free=3, cached=[0])
        t.do(AllocateImmutable(None, (3, 4)), ids=[1], free=2, cached=[0, 1])
        t.do(Free(0), free=3 if honest else 2, evictable=[0])
    both(run, F.FREE)


def test_chain_hash_without_the_previous_hash() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=4)
        t.do(AllocateImmutableChain(None, ((1, 2), (5, 6))), ids=[0, 1], free=2, cached=[0, 1])
        if honest:
            t.do(AllocateImmutableChain(None, ((3, 4), (5, 6))), ids=[2, 3], free=0,
                 cached=[0, 1, 2, 3])
        else:  # (5, 6) after (3, 4) hashes like (5, 6) after (1, 2)
            t.do(AllocateImmutableChain(None, ((3, 4), (5, 6))), ids=[2, 1], free=1,
                 cached=[0, 1, 2], hashes={3: t.chain_hash(1)})
    both(run, F.HASH)


def test_free_list_push_on_every_decrement() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=4)
        t.do(AllocateMutable(None), ids=[0], free=3).do(Fork(0))
        t.do(Free(0), free=3 if honest else 4)
    both(run, F.LEAK)


def test_fork_one_reference_short() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=2, gpu=4)
        t.do(AllocateMutable(None), ids=[0], free=3)
        t.do(Fork(0), refcounts=None if honest else {0: 1})
    both(run, F.RC)


def test_chain_allocation_keeps_blocks_when_it_runs_out() -> None:
    def run(honest: bool) -> None:
        t = Trace(bs=1, gpu=3)
        op = AllocateImmutableChain(None, ((1,), (2,), (3,), (4,)))
        if honest:
            t.do(op, error=ErrorKind.NO_FREE_BLOCKS)
        else:
            t.do(op, error=ErrorKind.NO_FREE_BLOCKS, free=0, cached=[0, 1, 2],
                 refcounts={0: 1, 1: 1, 2: 1})
    both(run, F.ATOMIC)
