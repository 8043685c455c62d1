"""Eviction policy for cached blocks whose refcount dropped to zero.

``LRUEvictor`` is exact: the victim is the candidate with the smallest
``last_accessed``; ties go to the largest ``num_hashed_tokens`` (the deepest block of a
chain goes first); remaining ties go to the earliest ``add`` (Aphrodite's rule;
``update`` keeps a candidate's add position). This holds for any insertion order of
timestamps and after any number of updates.

Implementation: every candidate has one live key ordered by ``(last_accessed,
-num_hashed_tokens, add_order)`` (packed into one int, see :class:`LRUEvictor`). Keys live
in one of two places:

- *runs*: a deque of small heaps, one per access time, with strictly increasing times
  along the deque. A key whose time is not older than the newest run's goes there (a new
  run, or the newest run's heap when the time is equal). This is the serving pattern:
  blocks are freed and touched with a clock that never goes back, so ``add``, ``update``
  and ``evict`` cost O(log b) in b = candidates sharing one time stamp, independent of
  the pool size.
- the *heap*: a binary heap for every key older than the newest run (out-of-order times);
  O(log n) as before.

Every key in run i is smaller than every key in run j > i, so the victim is the smaller
of the heap's minimum and the first run's minimum: the order is exact for any mix. Keys
are invalidated lazily: each candidate's metadata holds its one live key; any other
stored key for that id is stale and skipped when popped. When stored keys exceed twice
the live ones (plus a small slack) both places are filtered in place (runs keep their
order). Costs, n = candidates: ``add``/``update`` O(1) + O(log b) in order, O(log n) out
of order; ``remove`` O(1) plus amortized O(1) compaction; ``evict`` amortized O(log b) or
O(log n) (each stale key is popped at most once); ``__contains__``/``num_blocks`` O(1).
"""

from __future__ import annotations

import enum
import heapq
import struct
from abc import ABC, abstractmethod
from collections import deque

from prefixcache._validation import check_time
from prefixcache.errors import InvalidArgumentError, NoFreeBlocksError, UnknownBlockIdError

__all__ = ["BlockMetaData", "EvictionPolicy", "Evictor", "LRUEvictor", "make_evictor"]


class EvictionPolicy(enum.Enum):
    """Eviction policies; LRU is the only one."""

    LRU = enum.auto()


class BlockMetaData:
    """What the evictor knows about one candidate block."""

    __slots__ = ("_key", "content_hash", "last_accessed", "num_hashed_tokens")

    def __init__(self, content_hash: int, num_hashed_tokens: int, last_accessed: float) -> None:
        self.content_hash = content_hash
        self.num_hashed_tokens = num_hashed_tokens
        self.last_accessed = last_accessed
        self._key = -1  # the evictor's live heap key for this candidate

    def __repr__(self) -> str:
        return (
            f"BlockMetaData(content_hash={self.content_hash}, "
            f"num_hashed_tokens={self.num_hashed_tokens}, last_accessed={self.last_accessed})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlockMetaData):
            return NotImplemented
        return (self.content_hash, self.num_hashed_tokens, self.last_accessed) == (
            other.content_hash,
            other.num_hashed_tokens,
            other.last_accessed,
        )

    __hash__ = None  # type: ignore[assignment]


class Evictor(ABC):
    """Holds cached blocks with refcount 0 and picks which one to reuse."""

    @abstractmethod
    def __contains__(self, block_id: object) -> bool:
        """Whether ``block_id`` is a candidate."""

    @abstractmethod
    def evict(self) -> tuple[int, int]:
        """Remove and return ``(block_id, content_hash)`` of the victim.

        Raises :class:`NoFreeBlocksError` (a ``ValueError``) when empty.
        """

    @abstractmethod
    def add(
        self, block_id: int, content_hash: int, num_hashed_tokens: int, last_accessed: float
    ) -> None:
        """Add a candidate; adding an id twice is an :class:`InvalidArgumentError`."""

    @abstractmethod
    def update(self, block_id: int, last_accessed: float) -> None:
        """Set a candidate's access time; absent id -> :class:`UnknownBlockIdError`."""

    @abstractmethod
    def remove(self, block_id: int) -> None:
        """Drop a candidate; absent id -> :class:`UnknownBlockIdError`."""

    @property
    @abstractmethod
    def num_blocks(self) -> int:
        """Number of candidates."""


_FIELD_BITS = 64
_FIELD_MASK = (1 << _FIELD_BITS) - 1
_SIGN_BIT = 1 << 63
_MAX_TOKENS = (1 << 63) - 1
_LOW_MASK = (1 << 192) - 1  # every key field but the time


_EXACT_INT = 1 << 53  # ints a float holds exactly
_MIN_EXACT_INT = -_EXACT_INT
_pack_d = struct.Struct("<d").pack
_unpack_u64 = struct.Struct("<Q").unpack


def _time_field(last_accessed: float) -> int:
    """A non-negative 64-bit int that orders like ``last_accessed`` (IEEE-754 trick: the
    sign bit flipped for a non-negative float, every bit flipped for a negative one).

    Requires a value exactly representable as a float (any float, or an int of at most
    53 significant bits), so the order is exact; equal values give equal fields.
    """
    kind: type = last_accessed.__class__
    if kind is float and last_accessed == last_accessed:
        as_float = last_accessed + 0.0  # + 0.0 folds -0.0 into 0.0
    elif kind is int and _MIN_EXACT_INT <= last_accessed <= _EXACT_INT:
        as_float = float(last_accessed)  # exact; an int gives no -0.0
    else:
        check_time(last_accessed)  # non-NaN floats and ints up to 2**53 pass it
        as_float = float(last_accessed) + 0.0
    bits: int = _unpack_u64(_pack_d(as_float))[0]
    return bits ^ _SIGN_BIT if bits < _SIGN_BIT else _FIELD_MASK - bits


class LRUEvictor(Evictor):
    """Exact LRU with the upstream tie rules (see module docstring for costs).

    ``free_table`` maps candidate id -> :class:`BlockMetaData` in ``add`` order.

    Each candidate has one live key, a single int packing four 64-bit fields, most
    significant first: access time (order-preserving), ``2**63 - 1 - num_hashed_tokens``,
    add order, block id. The smallest key is the victim; the add order is unique, so the
    id never decides. Int keys keep the heaps compact (one object per entry). Block ids
    must be in ``[0, 2**64)`` and token counts in ``[0, 2**63)``.

    Stored keys (live or stale) are in ``_heap`` or in one of ``_runs``; every run is a
    non-empty heap of keys of one time field, and the runs' time fields strictly increase
    (``_tail_time`` is the last run's). ``_stored`` counts every stored key.
    """

    _COMPACT_SLACK = 64

    def __init__(self) -> None:
        self.free_table: dict[int, BlockMetaData] = {}
        self._heap: list[int] = []
        self._runs: deque[list[int]] = deque()
        self._tail_time = 0
        self._stored = 0
        self._next_order = 0

    def __contains__(self, block_id: object) -> bool:
        return block_id in self.free_table

    @property
    def num_blocks(self) -> int:
        return len(self.free_table)

    def add(
        self, block_id: int, content_hash: int, num_hashed_tokens: int, last_accessed: float
    ) -> None:
        if block_id in self.free_table:
            raise InvalidArgumentError(f"block {block_id} is already an eviction candidate")
        # Plain in-range ints (every internal caller's) skip the isinstance chains.
        if (block_id.__class__ is not int or not 0 <= block_id <= _FIELD_MASK) and (
            isinstance(block_id, bool)
            or not isinstance(block_id, int)
            or not (0 <= block_id <= _FIELD_MASK)
        ):
            raise InvalidArgumentError(f"block id {block_id!r} must be an int in [0, 2**64)")
        if (
            num_hashed_tokens.__class__ is not int or not 0 <= num_hashed_tokens <= _MAX_TOKENS
        ) and (
            isinstance(num_hashed_tokens, bool)
            or not isinstance(num_hashed_tokens, int)
            or not (0 <= num_hashed_tokens <= _MAX_TOKENS)
        ):
            raise InvalidArgumentError(f"num_hashed_tokens {num_hashed_tokens!r} is out of range")
        time_field = _time_field(last_accessed)
        key = (
            time_field << 192
            | (_MAX_TOKENS - num_hashed_tokens) << 128
            | self._next_order << 64
            | block_id
        )
        self._next_order += 1
        meta = BlockMetaData(content_hash, num_hashed_tokens, last_accessed)
        meta._key = key
        self.free_table[block_id] = meta
        self._store(time_field, key)

    def update(self, block_id: int, last_accessed: float) -> None:
        meta = self.free_table.get(block_id)
        if meta is None:
            raise UnknownBlockIdError(f"block {block_id} is not an eviction candidate")
        time_field = _time_field(last_accessed)
        key = time_field << 192 | (meta._key & _LOW_MASK)
        meta.last_accessed = last_accessed
        meta._key = key
        self._store(time_field, key)
        self._maybe_compact()

    def _store(self, time_field: int, key: int) -> None:
        """File ``key`` in the runs if its time is not older than the newest run's, else
        in the heap."""
        runs = self._runs
        if not runs or time_field > self._tail_time:
            runs.append([key])
            self._tail_time = time_field
        elif time_field == self._tail_time:
            heapq.heappush(runs[-1], key)
        else:
            heapq.heappush(self._heap, key)
        self._stored += 1

    def remove(self, block_id: int) -> None:
        if block_id not in self.free_table:
            raise UnknownBlockIdError(f"block {block_id} is not an eviction candidate")
        del self.free_table[block_id]
        self._maybe_compact()

    def evict(self) -> tuple[int, int]:
        """Pop the smallest stored key (the heap's top or the first run's) until a live
        one comes out."""
        free_table = self.free_table
        if not free_table:
            raise NoFreeBlocksError("no evictable block")
        heap = self._heap
        runs = self._runs
        while True:
            if runs:
                run = runs[0]
                if heap and heap[0] < run[0]:
                    key = heapq.heappop(heap)
                else:
                    key = heapq.heappop(run)
                    if not run:
                        runs.popleft()
            else:
                key = heapq.heappop(heap)
            self._stored -= 1
            block_id = key & _FIELD_MASK
            meta = free_table.get(block_id)
            if meta is not None and meta._key is key:
                break
        del free_table[block_id]
        if not free_table:
            self._clear_stored()
        return block_id, meta.content_hash

    def peek_order(self) -> list[int]:
        """Candidate ids in the order they would be evicted (O(n log n); for tests)."""
        return [key & _FIELD_MASK for key in sorted(m._key for m in self.free_table.values())]

    def _clear_stored(self) -> None:
        self._heap.clear()
        self._runs.clear()
        self._stored = 0

    def _maybe_compact(self) -> None:
        """Drop stale keys once they outnumber live ones (plus slack); runs keep their
        order, empty runs go."""
        free_table = self.free_table
        if not free_table:
            self._clear_stored()
            return
        if self._stored <= 2 * len(free_table) + self._COMPACT_SLACK:
            return

        def live(key: int) -> bool:
            meta = free_table.get(key & _FIELD_MASK)
            return meta is not None and meta._key is key

        heap = [key for key in self._heap if live(key)]
        heapq.heapify(heap)
        runs: deque[list[int]] = deque()
        for run in self._runs:
            kept = [key for key in run if live(key)]
            if kept:
                heapq.heapify(kept)
                runs.append(kept)
        self._heap = heap
        self._runs = runs
        if runs:
            self._tail_time = runs[-1][0] >> 192
        self._stored = len(heap) + sum(map(len, runs))


def make_evictor(eviction_policy: EvictionPolicy) -> Evictor:
    """Build the evictor for ``eviction_policy``; unknown -> :class:`InvalidArgumentError`."""
    if eviction_policy is EvictionPolicy.LRU:
        return LRUEvictor()
    raise InvalidArgumentError(f"unknown eviction policy {eviction_policy!r}")
