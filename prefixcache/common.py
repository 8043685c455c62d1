"""Shared building blocks: refcounts, copy-on-write records, block object pool,
block lists, hit-rate metrics and chain walking.
"""

from __future__ import annotations

import builtins
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prefixcache._validation import check_block_id
from prefixcache.errors import (
    DoubleFreeError,
    InvalidArgumentError,
    InvalidBlockError,
    UnknownBlockIdError,
)

if TYPE_CHECKING:
    from prefixcache.interfaces import Block, BlockAllocator

__all__ = [
    "BlockList",
    "BlockPool",
    "CacheMetricData",
    "CopyOnWriteTracker",
    "ReadOnlyRefCounter",
    "RefCounter",
    "get_all_blocks_recursively",
]


class RefCounter:
    """Reference count per physical block id; every known id starts at 0.

    Invariant: counts never go below 0 (``decr`` at 0 raises :class:`DoubleFreeError`,
    an ``AssertionError``); unknown ids, and non-int ids that would alias one (``True``,
    ``0.0``), raise :class:`UnknownBlockIdError`.
    """

    __slots__ = ("_refcounts",)

    def __init__(self, all_block_indices: Iterable[int]) -> None:
        self._refcounts: dict[int, int] = dict.fromkeys(all_block_indices, 0)

    def _current(self, block_id: int) -> int:
        if block_id.__class__ is not int:  # exact ints skip the (bool/float) alias check
            check_block_id(block_id)
        count = self._refcounts.get(block_id)
        if count is None:
            raise UnknownBlockIdError(f"block id {block_id!r} is not counted here")
        return count

    def incr(self, block_id: int) -> int:
        count = self._current(block_id) + 1
        self._refcounts[block_id] = count
        return count

    def decr(self, block_id: int) -> int:
        count = self._current(block_id)
        if count == 0:
            raise DoubleFreeError(f"refcount of block {block_id} is already 0")
        count -= 1
        self._refcounts[block_id] = count
        return count

    def get(self, block_id: int) -> int:
        return self._current(block_id)

    def as_readonly(self) -> ReadOnlyRefCounter:
        return ReadOnlyRefCounter(self)


class ReadOnlyRefCounter:
    """A view of a :class:`RefCounter` whose ``incr``/``decr`` raise
    :class:`InvalidArgumentError` (a ``ValueError``)."""

    __slots__ = ("_refcounter",)

    def __init__(self, refcounter: RefCounter) -> None:
        self._refcounter = refcounter

    def incr(self, block_id: int) -> int:
        raise InvalidArgumentError("incr is not allowed on a read-only refcounter")

    def decr(self, block_id: int) -> int:
        raise InvalidArgumentError("decr is not allowed on a read-only refcounter")

    def get(self, block_id: int) -> int:
        return self._refcounter.get(block_id)


class CopyOnWriteTracker:
    """Records (source, destination) id pairs of copy-on-write, in order."""

    __slots__ = ("_copy_on_writes", "_refcounter")

    def __init__(self, refcounter: RefCounter | ReadOnlyRefCounter) -> None:
        self._copy_on_writes: list[tuple[int, int]] = []
        self._refcounter = refcounter

    def is_appendable(self, block: Block) -> bool:
        """A block may be written in place iff it holds no id or its id has refcount <= 1."""
        block_id = block.block_id
        if block_id is None:
            return True
        return self._refcounter.get(block_id) <= 1

    def record_cow(self, src_block_id: int | None, trg_block_id: int | None) -> None:
        if src_block_id is None or trg_block_id is None:
            raise InvalidArgumentError("a copy-on-write needs both a source and a target id")
        self._copy_on_writes.append((src_block_id, trg_block_id))

    def clear_cows(self) -> list[tuple[int, int]]:
        cows = self._copy_on_writes
        self._copy_on_writes = []
        return cows

    def pending(self) -> list[tuple[int, int]]:
        """A copy of the recorded pairs, without clearing them."""
        return list(self._copy_on_writes)


class BlockPool:
    """Recycles block objects so allocation does not build new ones each time.

    Objects are created on demand until ``pool_size`` exist (upstream pre-builds them;
    this pays only for what is used); after that freed objects are reused first-in
    first-out, and only when none is free does the capacity double. So a stale handle
    to a freed block stays id-less for as long as possible, and a double free through
    it is detected rather than hitting a reissued block. ``free_block`` ignores objects
    this pool did not create, or that are already free.
    """

    __slots__ = (
        "_allocator",
        "_block_size",
        "_capacity",
        "_create_block",
        "_free_ids",
        "_is_free",
        "_pool",
    )

    def __init__(
        self,
        block_size: int,
        create_block: Callable[..., Block],
        allocator: BlockAllocator,
        pool_size: int,
    ) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 0:
            raise InvalidArgumentError(f"pool_size must be a non-negative int, got {pool_size!r}")
        self._block_size = block_size
        self._create_block = create_block
        self._allocator = allocator
        self._capacity = pool_size
        self._pool: list[Block] = []
        self._is_free: bytearray = bytearray()
        self._free_ids: deque[int] = deque()

    @property
    def pool_size(self) -> int:
        """Current capacity (objects that may exist before the next doubling)."""
        return self._capacity

    def init_block(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        block_size: int,
        physical_block_id: int | None,
        extra_hash: int | None = None,
    ) -> Block:
        """Return a (re)initialised block object holding ``physical_block_id``."""
        kwargs: dict[str, object] = {} if extra_hash is None else {"extra_hash": extra_hash}
        args = (prev_block, token_ids, block_size, self._allocator, physical_block_id)
        block = self.take_reusable()
        if block is not None:
            pool_id = block.pool_id  # type: ignore[attr-defined]
            block.__init__(*args, **kwargs)  # type: ignore[misc]
        else:
            if len(self._pool) >= self._capacity:
                self._capacity = max(1, 2 * self._capacity)
            block = self._create_block(
                prev_block=prev_block,
                token_ids=token_ids,
                block_size=block_size,
                allocator=self._allocator,
                block_id=physical_block_id,
                **kwargs,
            )
            pool_id = len(self._pool)
            self._pool.append(block)
            self._is_free.append(0)
        block.pool_id = pool_id  # type: ignore[attr-defined]
        return block

    def adopt(self, block: Block) -> None:
        """Make ``block``, built by the allocator itself after :meth:`take_reusable` found
        none, this pool's next object (as :meth:`init_block` does for the objects it builds)."""
        if len(self._pool) >= self._capacity:
            self._capacity = max(1, 2 * self._capacity)
        block.pool_id = len(self._pool)  # type: ignore[attr-defined]
        self._pool.append(block)
        self._is_free.append(0)

    def take_reusable(self) -> Block | None:
        """A freed object to re-initialise (marked in use; its ``pool_id`` attribute is
        its index), or ``None`` while the pool is below capacity or has no freed object."""
        if self._free_ids and len(self._pool) >= self._capacity:
            pool_id = self._free_ids.popleft()
            self._is_free[pool_id] = 0
            return self._pool[pool_id]
        return None

    def free_block(self, block: Block) -> None:
        """Return ``block`` for reuse (a no-op for objects not created here or already free)."""
        pool_id = getattr(block, "pool_id", None)
        if (
            isinstance(pool_id, int)
            and 0 <= pool_id < len(self._pool)
            and self._pool[pool_id] is block
            and not self._is_free[pool_id]
        ):
            self._is_free[pool_id] = 1
            self._free_ids.append(pool_id)


class BlockList:
    """A list of blocks plus a cached list of their physical ids.

    Invariant: ``ids()[i] == list()[i].block_id`` for every i, and no id is ``None``.
    ``append_token_ids`` refreshes the cached id after copy-on-write or promotion.
    """

    __slots__ = ("_block_ids", "_blocks")

    def __init__(self, blocks: builtins.list[Block]) -> None:
        self._blocks: builtins.list[Block] = []
        self._block_ids: builtins.list[int] = []
        self.update(blocks)

    @staticmethod
    def _checked_id(block: Block) -> int:
        block_id = block.block_id
        if block_id is None:
            raise InvalidBlockError("a block list only holds blocks that have an id")
        return block_id

    def update(self, blocks: builtins.list[Block]) -> None:
        """Replace the contents with ``blocks`` (the list object itself is kept)."""
        ids = [self._checked_id(block) for block in blocks]
        self._blocks = blocks
        self._block_ids = ids

    def append_token_ids(self, block_index: int, token_ids: builtins.list[int]) -> None:
        block = self._blocks[block_index]
        prev_block_id = block.block_id
        block.append_token_ids(token_ids)
        if block.block_id != prev_block_id:
            self._block_ids[block_index] = self._checked_id(block)

    def append(self, new_block: Block) -> None:
        block_id = self._checked_id(new_block)
        self._blocks.append(new_block)
        self._block_ids.append(block_id)

    def __len__(self) -> int:
        return len(self._blocks)

    def __getitem__(self, block_index: int) -> Block:
        return self._blocks[block_index]

    def __setitem__(self, block_index: int, new_block: Block) -> None:
        block_id = self._checked_id(new_block)
        self._blocks[block_index] = new_block
        self._block_ids[block_index] = block_id

    def reset(self) -> None:
        self._blocks = []
        self._block_ids = []

    def list(self) -> builtins.list[Block]:
        """The internal block list itself."""
        return self._blocks

    def ids(self) -> builtins.list[int]:
        """The internal id list itself."""
        return self._block_ids


@dataclass
class CacheMetricData:
    """Prefix-cache hit-rate counters.

    Queries are grouped in windows of ``block_size`` (upstream's name for the window
    length); the window fields mirror upstream. ``get_hit_rate`` is exactly
    ``num_hits / num_queries`` (0.0 before any query), computed from integer totals.
    """

    num_completed_blocks: int = 0
    completed_block_cache_hit_rate: float = 0.0
    num_incompleted_block_queries: int = 0
    num_incompleted_block_hit: int = 0
    block_size: int = 1000
    num_queries: int = 0
    num_hits: int = 0

    def query(self, hit: bool) -> None:
        self.num_queries += 1
        self.num_incompleted_block_queries += 1
        if hit:
            self.num_hits += 1
            self.num_incompleted_block_hit += 1
        if self.num_incompleted_block_queries == self.block_size:
            window_rate = self.num_incompleted_block_hit / self.num_incompleted_block_queries
            self.completed_block_cache_hit_rate = (
                self.completed_block_cache_hit_rate * self.num_completed_blocks + window_rate
            ) / (self.num_completed_blocks + 1)
            self.num_incompleted_block_queries = 0
            self.num_incompleted_block_hit = 0
            self.num_completed_blocks += 1

    def get_hit_rate(self) -> float:
        if self.num_queries == 0:
            return 0.0
        return self.num_hits / self.num_queries


def get_all_blocks_recursively(last_block: Block) -> list[Block]:
    """The chain ending at ``last_block``, first block first.

    Iterative despite its upstream name: O(k) time, O(1) stack, any chain length.
    A cyclic chain raises :class:`InvalidArgumentError`.
    """
    chain: list[Block] = []
    seen: set[int] = set()
    node: Block | None = last_block
    while node is not None:
        key = id(node)
        if key in seen:
            raise InvalidArgumentError("block chain contains a cycle")
        seen.add(key)
        chain.append(node)
        node = node.prev_block
    chain.reverse()
    return chain
