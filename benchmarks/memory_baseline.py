"""Memory baseline of the pool-scaling steps: the same keys, in the same order, looked up in
the plainest Python structures of the same sizes.

For every step of :mod:`benchmarks.bench_allocator_scaling` there is a baseline with the same
shape (pool size, operations) -> (run, operations). Per allocator operation it does one
``dict.get`` per index that operation must consult (block id -> per-id state, and content hash
-> block id where the step hits or fills the prefix cache), keyed by the ids the step's
operations touch, in the order they touch them, in dicts holding as many entries (distinct
value objects) as the allocator's at that pool size. Two steps need another structure to do
the same lookup: ``get_physical_block_id`` maps an id to its rank (cheapest: a list indexed by
``id - base``), and the steps that pick or file an eviction candidate by an out-of-order
access time go through a binary heap (``heapq``) of as many 256-bit int keys as the evictor
holds (so their baseline contains the heap's O(log n) on purpose: it is the cheapest exact
structure for that order). A baseline's cost grows with the pool through caches and TLB (and
that heap's depth): its ratio between two pool sizes is what the access pattern alone costs,
and the step's ratio divided by it is the growth beyond that baseline. :func:`pattern` states
each step's sequence; the smoke tests check it against the ids the allocator hands out.
"""

from __future__ import annotations

import enum
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.bench_allocator_scaling import CHAIN, STEPS

__all__ = ["BASELINES", "Lookup", "Pattern", "content_key", "heap_key", "make_baseline", "pattern"]


def content_key(block_id: int) -> int:
    """A stand-in content hash for ``block_id``: a full-width int, so dict slots are as
    scattered as the allocator's hash-keyed ones (deterministic: no string hashing)."""
    return hash((block_id, 0x5EED))


class Lookup(enum.Enum):
    """The structure one step's baseline goes through, besides the dicts."""

    DICT = enum.auto()  # id-keyed (and hash-keyed) dicts only
    DENSE = enum.auto()  # a list indexed by id - first id instead of the id-keyed dict
    HEAP_POP = enum.auto()  # + pop the least recent key from a heap of every candidate
    HEAP_PUSH = enum.auto()  # + push the freed block's key onto a heap of the candidates


@dataclass(frozen=True, slots=True)
class Pattern:
    """What one step's operations look up.

    ``id_keys`` entries in the id-keyed dict, ``hash_entries`` in the hash-keyed one (0: the
    step does not consult the prefix cache); ``ids`` is the id sequence, ``per_op`` ids per
    operation (a chain op touches several). For the heap lookups, ``times[i]`` is block
    ``i``'s access time and ``heap_ids`` the ids whose keys are in the heap at the start.
    """

    id_keys: range
    hash_entries: int
    ids: list[int]
    per_op: int = 1
    lookup: Lookup = Lookup.DICT
    times: list[int] = field(default_factory=list)
    heap_ids: range = range(0)

    @property
    def ops(self) -> int:
        return len(self.ids) // self.per_op


_BIAS = 1 << 63  # keys laid out like the evictor's: time, tokens, add order, id (64 bits each)


def heap_key(block_id: int, time: int) -> int:
    """A 256-bit int key ordered by ``time`` then add order (= id here), as the evictor's."""
    return (_BIAS + time) << 192 | (_BIAS - 1 - 16) << 128 | block_id << 64 | block_id


def _shuffled_times(n: int) -> list[int]:
    """``_filled_evictor``'s access times (block ``i`` gets ``times[i]``), same draw."""
    times = list(range(n))
    random.Random(n).shuffle(times)
    return times


def _evicted_order(times: list[int], k: int) -> list[int]:
    """The ids evicted first: the least recent access time goes first."""
    return sorted(range(len(times)), key=times.__getitem__)[:k]


def pattern(name: str, n: int, k: int) -> Pattern:
    """The lookup sequence of step ``name`` on an ``n``-block pool doing ``k`` operations."""
    ids = range(n)
    first = list(range(k))
    if name == "allocate mutable" or name == "free (hashless)":
        return Pattern(ids, 0, first)
    if name == "allocate immutable (miss)":  # the prefix cache grows from empty to k entries
        return Pattern(ids, k, first)
    if name == "allocate immutable (hit, active)":  # one cached id, n // 2 cached in all
        return Pattern(ids, n // 2, [0] * k)
    if name == "allocate immutable (hit, evictable)":  # revival: lazy removal, no heap work
        return Pattern(ids, n, first)
    if name == "free (cached -> evictor)":  # blocks k.. already evictable, times random
        rng = random.Random(n)
        times = [rng.randrange(n) for _ in range(n)]
        return Pattern(ids, n, first, lookup=Lookup.HEAP_PUSH, times=times,
                       heap_ids=range(k, n))
    if name == "evict (times out of order)":
        times = _shuffled_times(n)
        return Pattern(ids, n, _evicted_order(times, k), lookup=Lookup.HEAP_POP, times=times,
                       heap_ids=ids)
    if name == "evict (times in order)":  # in-order times take the evictor's O(1) runs path
        return Pattern(ids, n, _evicted_order(list(range(n)), k))
    if name == "get_physical_block_id":  # CPU ids follow the n GPU ids
        rng = random.Random(n)
        return Pattern(range(n, 2 * n), 0, [rng.randrange(n, 2 * n) for _ in range(k)],
                       lookup=Lookup.DENSE)
    if name == f"fork ({CHAIN}-block chain)":  # the chain's ids follow n // 2 cached ones
        return Pattern(ids, n // 2 + CHAIN, list(range(n // 2, n // 2 + CHAIN)) * k, CHAIN)
    if name == f"swap ({CHAIN}-block sequence)":  # one id per block per direction
        rounds = max(1, k // 2)
        return Pattern(ids, n // 2 + CHAIN, list(range(n // 2, n // 2 + CHAIN)) * 2 * rounds,
                       CHAIN)
    raise KeyError(f"no memory baseline for step {name!r}")


Run = Callable[[], None]


def _dense(p: Pattern) -> Run:
    table = list(p.id_keys)  # distinct int objects, in id order
    base = p.id_keys.start
    seq = p.ids

    def run() -> None:
        for block_id in seq:
            table[block_id - base]

    return run


def _dicts(p: Pattern) -> Run:
    # Values are distinct objects built in key order, as the allocator's are: a hit
    # touches the value (its refcount), not just the table.
    get_id = {i: [i] for i in p.id_keys}.get
    if not p.hash_entries:
        seq = p.ids

        def run_ids() -> None:
            for block_id in seq:
                get_id(block_id)

        return run_ids
    get_hash = {content_key(i): [i] for i in range(p.hash_entries)}.get
    pairs = [(i, content_key(i)) for i in p.ids]

    def run_pairs() -> None:
        for block_id, key in pairs:
            get_id(block_id)
            get_hash(key)

    return run_pairs


def _with_heap(p: Pattern) -> Run:
    heap = [heap_key(i, p.times[i]) for i in p.heap_ids]  # keys built in id order
    heapq.heapify(heap)
    get_id = {i: [i] for i in p.id_keys}.get
    get_hash = {content_key(i): [i] for i in range(p.hash_entries)}.get
    pairs = [(i, content_key(i)) for i in p.ids]
    if p.lookup is Lookup.HEAP_POP:
        pop = heapq.heappop

        def run_pop() -> None:
            for block_id, key in pairs:
                pop(heap)
                get_id(block_id)
                get_hash(key)

        return run_pop
    push = heapq.heappush
    keyed = [(i, key, heap_key(i, p.times[i])) for i, key in pairs]

    def run_push() -> None:
        for block_id, key, order in keyed:
            get_id(block_id)
            get_hash(key)
            push(heap, order)

    return run_push


def make_baseline(name: str) -> Callable[[int, int], tuple[Run, int]]:
    """The baseline of step ``name``, shaped like the step: ``(n, k) -> (run, ops)``."""

    def setup(n: int, k: int) -> tuple[Run, int]:
        p = pattern(name, n, k)
        if p.lookup is Lookup.DENSE:
            return _dense(p), p.ops
        if p.lookup is Lookup.DICT:
            return _dicts(p), p.ops
        return _with_heap(p), p.ops

    return setup


#: Step name -> its memory baseline (every step of the scaling benchmark has one).
BASELINES: dict[str, Callable[[int, int], tuple[Run, int]]] = {
    name: make_baseline(name) for name in STEPS
}
