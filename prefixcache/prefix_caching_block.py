"""The prefix-caching allocator: blocks with equal content share one physical id.

Every physical id is in exactly one state:

1. *hashless-free*: in ``_hashless_allocator._free_block_indices``, refcount 0,
   tracker inactive, not cached;
2. *active mutable*: refcount >= 1, tracker active, not cached;
3. *active cached*: refcount >= 1, tracker active, ``_cached_blocks[hash] == id``;
4. *evictable cached*: refcount 0, in ``evictor``, still cached, tracker inactive.

Invariants kept by every operation: free count = hashless-free + evictable; tracker
active iff refcount > 0; ``_cached_blocks`` (hash -> id) and the trackers'
``content_hash`` (id -> hash) are inverse maps; the evictor holds exactly the cached
ids with refcount 0; ``_touched_blocks`` holds only active ids.

Computed (the engine may skip the block's prefill): an active id once a
``mark_blocks_as_computed`` found it touched; an evictable id unless it is in
``_unwritten`` (released before any mark: an aborted request's KV was never written). Such
an id stays cached (a re-request hits it, as upstream), but the hit revives it uncomputed
and touched, so the mark after the re-request's prefill computes it. Dropping it from the
cache would serve the engine as well, but would change the free, cached and evictable sets
upstream's unit tests pin for blocks freed before any mark. Computed-id answers are a
prefix of the ids asked about. Operations validate everything before mutating anything, so a
raised error leaves all of that (and the hit-rate counters, copy-on-write records and
block objects) unchanged.

Costs: allocation, free, promotion and copy-on-write are O(1) plus the evictor's cost
(O(log b) for access times that never go back, b = blocks sharing one time stamp; O(log n)
otherwise, n = evictable blocks; see :mod:`prefixcache.evictor`); chain operations (fork,
allocate_immutable_blocks, content hashing) are O(k) in the k blocks involved and never
recurse.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Protocol, cast

from prefixcache._validation import (
    check_block,
    check_block_id,
    check_block_size,
    check_count,
    check_device_none,
    check_extra_hash,
    check_time,
    checked_block_ids,
    checked_block_tokens,
    checked_blocks,
    checked_list,
    checked_tokens,
)
from prefixcache.common import (
    BlockPool,
    CacheMetricData,
    CopyOnWriteTracker,
    get_all_blocks_recursively,
)
from prefixcache.errors import (
    BlockFullError,
    ImmutableBlockError,
    InvalidArgumentError,
    InvalidBlockError,
    NoFreeBlocksError,
    SwapError,
    UnknownBlockIdError,
)
from prefixcache.evictor import EvictionPolicy, Evictor, make_evictor
from prefixcache.hashing import HashFunction, default_hash_function
from prefixcache.interfaces import Block, BlockAllocator, BlockId
from prefixcache.naive_block import (
    NaiveBlockAllocator,
    check_no_duplicate_objects,
    forkable_block_id,
    held_block_id,
)
from prefixcache.utils import Device, cdiv

__all__ = [
    "BlockTracker",
    "ComputedBlocksTracker",
    "LastAccessBlocksTracker",
    "PrefixCachingBlock",
    "PrefixCachingBlockAllocator",
]

logger = logging.getLogger(__name__)

PrefixHash = int

_DEFAULT_LAST_ACCESSED_TIME = -1

# Ids may spread over at most twice their count plus this before the id-indexed tracker
# list is left out (a CPU pool's ids start after the GPU's).
_DENSE_SLACK = 1024

# What get_common_computed_block_ids returns when every list is empty: upstream returns
# os.path.commonprefix([]), which is the empty *string*. Kept for compatibility.
_EMPTY_COMMON_PREFIX = cast("list[int]", "")


class BlockTracker:
    """Per-id state: ``active`` (refcount > 0), ``last_accessed``, ``computed``, and the
    ``content_hash`` the id is cached under (``None`` if it is not cached).

    ``enable``/``disable`` require the opposite state (else :class:`InvalidBlockError`)
    and reset ``last_accessed`` and ``computed``; ``content_hash`` is left alone.
    ``block_id`` is the allocator's own id object for this tracker (-1 for a
    stand-alone tracker); ``held`` is that object while active and ``None`` otherwise, so
    one identity test (``tracker.held is block_id``) proves an id an exact, held int of
    this allocator: a bool, a float or an equal int from elsewhere fails it.
    """

    __slots__ = ("active", "block_id", "computed", "content_hash", "held", "last_accessed")

    def __init__(self, block_id: int = -1) -> None:
        self.active = False
        self.block_id = block_id
        self.held: int | None = None
        self.last_accessed: float = _DEFAULT_LAST_ACCESSED_TIME
        self.computed = False
        self.content_hash: int | None = None

    def reset(self) -> None:
        self.last_accessed = _DEFAULT_LAST_ACCESSED_TIME
        self.computed = False

    def enable(self) -> None:
        if self.active:
            raise InvalidBlockError("block tracker is already active")
        self.active = True
        self.held = self.block_id
        self.last_accessed = _DEFAULT_LAST_ACCESSED_TIME
        self.computed = False

    def disable(self) -> None:
        if not self.active:
            raise InvalidBlockError("block tracker is not active")
        self.active = False
        self.held = None
        self.last_accessed = _DEFAULT_LAST_ACCESSED_TIME
        self.computed = False


_new_block_object = object.__new__


def _real_block(block: object) -> PrefixCachingBlock | None:
    """``block`` if it is an actual :class:`PrefixCachingBlock` (not a spec'd mock)."""
    if isinstance(block, PrefixCachingBlock) and issubclass(type(block), PrefixCachingBlock):
        return block
    return None


def _owner_hash_function(allocator: object) -> HashFunction:
    """The hash of blocks bound to ``allocator``: its injected function if it is a real
    :class:`PrefixCachingBlockAllocator`, else the default (e.g. for mocks)."""
    if type(allocator) is PrefixCachingBlockAllocator or issubclass(
        type(allocator), PrefixCachingBlockAllocator
    ):
        return cast(PrefixCachingBlockAllocator, allocator)._hash_function
    return default_hash_function


class PrefixCachingBlock(Block):
    """A block whose full content (with its whole prefix and ``extra_hash``) is hashed.

    It stores its tokens and id itself (no wrapped block: every access is one slot read).
    ``content_hash`` is computed lazily and memoised once non-``None``: it is ``None`` until
    the block is full and its predecessor has a hash; a predecessor hash of ``None`` or of
    the sentinel ``_none_hash`` both mean "not hashed". Computing it walks an unhashed
    chain iteratively and memoises every block on the way.

    Appending copies on write first (if shared; running out of blocks there changes
    nothing), then adds the tokens, then, if the block became hashable, promotes it
    (possibly switching to an existing cached id).
    """

    #: vLLM's "no hash" sentinel (``hash('None')``); only ever compared, never hashed.
    _none_hash: ClassVar[int] = hash("None")

    _cached_num_tokens_total: int

    __slots__ = (
        "_allocator",
        "_block_id",
        "_block_size",
        "_cached_content_hash",
        "_cached_num_tokens_total",
        "_computed",
        "_extra_hash",
        "_hash_fn",
        "_last_accessed",
        "_owner",
        "_prev_block",
        "_token_ids",
        "pool_id",
    )

    def __init__(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        block_size: int,
        allocator: BlockAllocator,
        block_id: int | None = None,
        computed: bool = False,
        extra_hash: int | None = None,
    ) -> None:
        if allocator.__class__ is not PrefixCachingBlockAllocator and not isinstance(
            allocator, PrefixCachingBlockAllocator
        ):
            raise InvalidArgumentError(
                f"a PrefixCachingBlock needs a PrefixCachingBlockAllocator, got {allocator!r}"
            )
        if (
            prev_block is not None
            and prev_block.__class__ is not PrefixCachingBlock
            and not isinstance(prev_block, PrefixCachingBlock)
        ):
            raise InvalidArgumentError(
                f"prev_block must be a PrefixCachingBlock or None, got {type(prev_block)!r}"
            )
        if extra_hash is not None:
            check_extra_hash(extra_hash)
        self._token_ids = checked_block_tokens(token_ids, block_size)
        self._block_size = block_size
        self._block_id = block_id
        self._prev_block = prev_block
        self._cached_content_hash: int | None = None
        self._allocator: BlockAllocator = allocator
        self._hash_fn = _owner_hash_function(allocator)
        self._last_accessed: float = _DEFAULT_LAST_ACCESSED_TIME
        self._computed = computed
        self._extra_hash = extra_hash
        self._owner: BlockAllocator | None = None
        self._update_num_tokens_total()

    def _reinit(
        self,
        prev_block: PrefixCachingBlock | None,
        token_ids: list[int],
        block_id: int,
        extra_hash: int | None,
        owner: PrefixCachingBlockAllocator,
    ) -> None:
        """``__init__`` for an ``owner`` that already checked every argument:
        ``token_ids`` is a fresh list of ints that fits ``owner``'s block size, and
        ``prev_block`` and ``extra_hash`` passed its public checks. Sets ``_owner``."""
        self._token_ids = token_ids
        self._block_size = owner._block_size
        self._block_id = block_id
        self._prev_block = prev_block
        self._cached_content_hash = None
        self._allocator = owner
        self._hash_fn = owner._hash_function
        self._last_accessed = _DEFAULT_LAST_ACCESSED_TIME
        self._computed = False
        self._extra_hash = extra_hash
        self._owner = owner
        total = len(token_ids)
        if prev_block is not None:
            total += prev_block._cached_num_tokens_total
        self._cached_num_tokens_total = total

    def _update_num_tokens_total(self) -> None:
        prev = self._prev_block
        total: int = len(self._token_ids)
        if prev is not None:
            if type(prev) is PrefixCachingBlock:
                total += prev._cached_num_tokens_total
            else:
                real_prev = _real_block(prev)
                if real_prev is not None:
                    total += real_prev._cached_num_tokens_total
                else:
                    total += prev.num_tokens_total
        self._cached_num_tokens_total = total

    # -- tokens ---------------------------------------------------------------------------

    def append_token_ids(self, token_ids: list[int]) -> None:
        self._append(checked_tokens(token_ids))

    def _append(self, tokens: list[int]) -> None:
        """``append_token_ids`` for tokens already checked (a fresh list of ints)."""
        written = self._token_ids
        owner = self._owner
        block_id = self._block_id
        if (
            0 < len(tokens) < self._block_size - len(written)
            and not self._computed
            and type(owner) is PrefixCachingBlockAllocator
            and block_id is not None
            and owner._refcounter._refcounts.get(block_id) == 1
        ):
            # The decode step: an unshared mutable block of the bundled allocator that stays
            # partial (so it has no hash). No copy to make, nothing to promote.
            written.extend(tokens)
            self._update_num_tokens_total()
            return
        if self._computed or self._current_hash() is not None:
            raise ImmutableBlockError("cannot append to a hashed or computed block")
        if not tokens:
            return
        empty = self._block_size - len(self._token_ids)
        if len(tokens) > empty:
            raise BlockFullError(f"{len(tokens)} tokens do not fit {empty} empty slots")
        target = self._owner if self._owner is not None else self._allocator
        block_id = self._block_id
        if block_id is None:
            if len(tokens) == empty and issubclass(type(target), PrefixCachingBlockAllocator):
                raise InvalidBlockError("a block without an id cannot be filled and promoted")
        else:
            self._block_id = target.cow_block_if_not_appendable(self)
        self._token_ids.extend(tokens)
        self._update_num_tokens_total()
        if self._current_hash() is not None:
            self._block_id = target.promote_to_immutable_block(self)

    # -- hashing ----------------------------------------------------------------------------

    @property
    def content_hash(self) -> int | None:
        return self._current_hash()

    def _current_hash(self) -> int | None:
        cached = self._cached_content_hash
        if cached is not None:
            return cached
        if len(self._token_ids) != self._block_size:
            return None
        return self._compute_content_hash()

    def _compute_content_hash(self) -> int | None:
        """Hash this full block, walking back (iteratively) to the nearest hashed block."""
        pending: list[PrefixCachingBlock] = []
        node = self
        prev_hash: int | None
        while True:
            pending.append(node)
            prev = node._prev_block
            if prev is None:
                prev_hash = None
                break
            real_prev = prev if type(prev) is PrefixCachingBlock else _real_block(prev)
            if real_prev is None:
                prev_hash = prev.content_hash
                if prev_hash is None or prev_hash == self._none_hash:
                    return None
                break
            prev_hash = real_prev._cached_content_hash
            if prev_hash is not None:
                break
            if len(real_prev._token_ids) != real_prev._block_size:
                return None
            node = real_prev
        for node in reversed(pending):
            prev_hash = node._hash_fn(
                node._prev_block is None, prev_hash, node._token_ids, node._extra_hash
            )
            node._cached_content_hash = prev_hash
        return prev_hash

    @classmethod
    def hash_block_tokens(
        cls,
        is_first_block: bool,
        prev_block_hash: int | None,
        cur_block_token_ids: Sequence[int],
        extra_hash: int | None = None,
    ) -> int:
        """The default content hash (see :mod:`prefixcache.hashing`).

        ``prev_block_hash`` may be ``None`` or ``_none_hash`` for a first block.
        """
        if prev_block_hash is not None and prev_block_hash == cls._none_hash:
            prev_block_hash = None
        return default_hash_function(
            is_first_block, prev_block_hash, cur_block_token_ids, extra_hash
        )

    # -- plain properties -------------------------------------------------------------------

    @property
    def block_id(self) -> int | None:
        return self._block_id

    @block_id.setter
    def block_id(self, value: int | None) -> None:
        self._block_id = value

    @property
    def computed(self) -> bool:
        return self._computed

    @computed.setter
    def computed(self, value: bool) -> None:
        self._computed = value

    @property
    def last_accessed(self) -> float:
        return self._last_accessed

    @last_accessed.setter
    def last_accessed(self, last_accessed_ts: float) -> None:
        self._last_accessed = last_accessed_ts

    @property
    def is_full(self) -> bool:
        return len(self._token_ids) == self._block_size

    @property
    def num_empty_slots(self) -> int:
        return self._block_size - len(self._token_ids)

    @property
    def num_tokens_total(self) -> int:
        return self._cached_num_tokens_total

    @property
    def block_size(self) -> int:
        return self._block_size

    @property
    def token_ids(self) -> list[int]:
        return self._token_ids

    @property
    def prev_block(self) -> Block | None:
        return self._prev_block

    @property
    def extra_hash(self) -> int | None:
        return self._extra_hash


class PrefixCachingBlockAllocator(BlockAllocator):
    """Content-addressed block allocator (see the module docstring for the states).

    ``hash_function`` (default :func:`prefixcache.hashing.hash_block_tokens`) keys every
    block this allocator creates; inject a weak one only to test collision handling.
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        block_ids: Iterable[int] | None = None,
        eviction_policy: EvictionPolicy = EvictionPolicy.LRU,
        hash_function: HashFunction | None = None,
    ) -> None:
        check_count(num_blocks, "num_blocks")
        check_block_size(block_size)
        ids = (
            list(range(num_blocks))
            if block_ids is None
            else checked_block_ids(block_ids, num_blocks)
        )
        if hash_function is not None and not callable(hash_function):
            raise InvalidArgumentError("hash_function must be callable")
        self._block_size = block_size
        self._hash_function: HashFunction = (
            hash_function if hash_function is not None else default_hash_function
        )
        self.eviction_policy = eviction_policy
        self.evictor: Evictor = make_evictor(eviction_policy)
        # hash -> id for every cached id (active or evictable); the inverse is kept in
        # each id's tracker (content_hash).
        self._cached_blocks: dict[PrefixHash, BlockId] = {}
        # Active ids promoted (or revived unwritten) since the last mark_blocks_as_computed.
        self._touched_blocks: set[BlockId] = set()
        # Evictable ids released before any mark found them computed: still cached (a
        # re-request hits them), but their KV was never written, so they are not computed.
        self._unwritten: set[BlockId] = set()
        self._block_tracker: dict[BlockId, BlockTracker] = {
            block_id: BlockTracker(block_id) for block_id in ids
        }
        # The same trackers indexed by id (None where no id), when the ids are dense enough
        # for a list: ``mark_blocks_as_accessed``'s fast path (list indexing, no hashing).
        self._tracker_at: list[BlockTracker | None] | None = None
        top = max(ids, default=-1)
        if top < 2 * len(ids) + _DENSE_SLACK:
            tracker_at: list[BlockTracker | None] = [None] * (top + 1)
            for block_id, tracker in self._block_tracker.items():
                tracker_at[block_id] = tracker
            self._tracker_at = tracker_at
        self._block_pool = BlockPool(block_size, self._create_block, self, num_blocks * 4)
        self._hashless_allocator = NaiveBlockAllocator(
            create_block=self._create_block,
            num_blocks=num_blocks,
            block_size=block_size,
            block_ids=ids,
            block_pool=self._block_pool,
        )
        self._refcounter = self._hashless_allocator.refcounter
        # (prev hash, extra_hash, chunks, hashes) of the last chain hashed: a table's
        # admission count and its allocation hash the same chain back to back. The hash is
        # a pure function of the key (compared by value), so a hit is exact.
        self._last_chain: (
            tuple[int | None, int | None, list[list[int]], tuple[PrefixHash, ...]] | None
        ) = None
        self._cow_tracker = CopyOnWriteTracker(self._refcounter.as_readonly())
        self.metric_data = CacheMetricData()

    def _create_block(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        block_size: int,
        allocator: BlockAllocator,
        block_id: int | None = None,
        computed: bool = False,
        extra_hash: int | None = None,
    ) -> Block:
        """``Block.Factory`` bound to this allocator."""
        return PrefixCachingBlock(
            prev_block, token_ids, block_size, self, block_id, computed, extra_hash
        )

    @property
    def hash_function(self) -> HashFunction:
        return self._hash_function

    # -- id state transitions (callers have validated; none of these can fail) ---------------

    def _take_fresh_id(self) -> BlockId:
        """A hashless-free id, else the evictor's victim (uncached); refcount 1, tracked
        with ``computed=False``. :class:`NoFreeBlocksError` if neither exists."""
        free_ids = self._hashless_allocator._free_block_indices
        if free_ids:
            block_id = free_ids.popleft()
            tracker = self._block_tracker[block_id]
        elif self.evictor.num_blocks:
            block_id, content_hash = self.evictor.evict()
            del self._cached_blocks[content_hash]
            tracker = self._block_tracker[block_id]
            block_id = tracker.block_id  # this allocator's own id object (see BlockTracker)
            tracker.content_hash = None
            self._unwritten.discard(block_id)
        else:
            raise NoFreeBlocksError()
        self._refcounter.incr(block_id)
        tracker.enable()
        return block_id

    def _acquire_cached(self, block_id: BlockId) -> None:
        """One more reference to a cached id; revive it from the evictor at refcount 1:
        computed if its KV was written, else uncomputed and touched (the mark after this
        request's prefill computes it)."""
        if self._refcounter.incr(block_id) == 1:
            self.evictor.remove(block_id)
            tracker = self._block_tracker[block_id]
            tracker.enable()
            if block_id in self._unwritten:
                self._unwritten.discard(block_id)
                self._touched_blocks.add(block_id)
            else:
                tracker.computed = True

    def _release(self, block_id: BlockId, block: Block) -> None:
        """Drop one reference. At 0 a cached id enters the evictor (still cached), any
        other id returns to the left of the free deque."""
        refcounts = self._refcounter._refcounts
        count = refcounts[block_id] - 1  # a held id (callers checked): count >= 1
        refcounts[block_id] = count
        if count:
            return
        tracker = self._block_tracker[block_id]
        content_hash = tracker.content_hash
        if content_hash is not None:
            self.evictor.add(block_id, content_hash, block.num_tokens_total, tracker.last_accessed)
            if not tracker.computed:  # released before its KV was written (an abort)
                self._unwritten.add(block_id)
                self._touched_blocks.discard(block_id)
            tracker.disable()
        else:
            tracker.disable()
            self._hashless_allocator._free_block_indices.appendleft(block_id)

    def _forget_unwritten(self, block_id: BlockId, content_hash: PrefixHash) -> None:
        """An evictable id whose KV was never written leaves the cache for the hashless
        deque (free count unchanged)."""
        self.evictor.remove(block_id)
        del self._cached_blocks[content_hash]
        self._block_tracker[block_id].content_hash = None
        self._unwritten.discard(block_id)
        self._hashless_allocator._free_block_indices.appendleft(block_id)

    def _cache(self, content_hash: PrefixHash, block_id: BlockId) -> None:
        self._cached_blocks[content_hash] = block_id
        self._block_tracker[block_id].content_hash = content_hash
        self._touched_blocks.add(block_id)

    def _is_active_cached(self, content_hash: PrefixHash) -> bool:
        block_id = self._cached_blocks.get(content_hash)
        return block_id is not None and self._refcounter._refcounts[block_id] > 0

    # -- validation helpers --------------------------------------------------------------------

    def _check_held(self, block: Block) -> BlockId:
        if type(block) is PrefixCachingBlock and block._owner is self:
            block_id = block._block_id
            if block_id is not None and self._refcounter._refcounts.get(block_id):
                return block_id
        return held_block_id(self, block, self._refcounter._refcounts)

    @staticmethod
    def _check_prev(prev_block: Block | None) -> None:
        if prev_block is not None and not isinstance(prev_block, PrefixCachingBlock):
            raise InvalidArgumentError(
                f"prev_block must be a PrefixCachingBlock or None, got {type(prev_block)!r}"
            )

    def _chain_hashes(
        self,
        prev_block: Block | None,
        chunks: Sequence[list[int]],
        extra_hash: int | None,
        chunks_kept: bool = True,
    ) -> list[PrefixHash]:
        """Content hashes of full blocks ``chunks`` chained after ``prev_block``.

        The memo copies ``chunks`` unless ``chunks_kept`` is false (the caller's fresh
        lists, which nobody else keeps or mutates)."""
        for tokens in chunks:
            if len(tokens) != self._block_size:
                raise InvalidArgumentError(
                    f"an immutable block needs exactly {self._block_size} tokens, got {len(tokens)}"
                )
        hashes: list[PrefixHash] = []
        if not chunks:
            return hashes
        prev_hash: int | None = None
        if prev_block is not None:
            prev_hash = prev_block.content_hash
            if prev_hash is None or prev_hash == PrefixCachingBlock._none_hash:
                raise InvalidArgumentError(
                    "an immutable block needs a predecessor that has a content hash"
                )
        memo = self._last_chain
        if (
            memo is not None
            and memo[0] == prev_hash
            and memo[1] == extra_hash
            and memo[2] == chunks
        ):
            return list(memo[3])  # the admission count just hashed this chain
        first_hash = prev_hash
        for tokens in chunks:
            prev_hash = self._hash_function(prev_hash is None, prev_hash, tokens, extra_hash)
            hashes.append(prev_hash)
        memo_chunks = [list(t) for t in chunks] if chunks_kept else list(chunks)
        self._last_chain = (first_hash, extra_hash, memo_chunks, tuple(hashes))
        return hashes

    def _count_needed(self, hashes: Iterable[PrefixHash]) -> int:
        """Free-count drop of acquiring ``hashes`` in order: one per distinct hash that is
        not cached on an active id (a miss takes a fresh id, an evictable hit revives)."""
        cached = self._cached_blocks
        refcounts = self._refcounter._refcounts
        seen: set[PrefixHash] = set()
        needed = 0
        for content_hash in hashes:
            if content_hash in seen:
                continue
            seen.add(content_hash)
            block_id = cached.get(content_hash)
            if block_id is None or not refcounts[block_id]:  # _is_active_cached, inline
                needed += 1
        return needed

    def _new_block(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        block_id: BlockId,
        extra_hash: int | None,
        owned: bool = False,
    ) -> PrefixCachingBlock:
        """A block of this allocator holding ``block_id``; the caller has checked the
        arguments (``prev_block`` a :class:`PrefixCachingBlock` or ``None``, ``token_ids``
        ints that fit a block). ``token_ids`` is copied unless ``owned`` (a fresh list
        nobody else keeps). With a plain predecessor (or none), a pooled object of exactly
        :class:`PrefixCachingBlock` is re-initialised without re-checking, and so is a new
        one when this allocator is of exactly this class (a subclass may build its own
        blocks in ``_create_block``); anything else goes through ``__init__``."""
        pool = self._block_pool
        reusable = pool.take_reusable()
        if (
            reusable is None
            and type(self) is PrefixCachingBlockAllocator
            and (prev_block is None or prev_block.__class__ is PrefixCachingBlock)
        ):
            made: PrefixCachingBlock = _new_block_object(PrefixCachingBlock)
            made._reinit(
                prev_block, token_ids if owned else list(token_ids), block_id, extra_hash, self
            )
            pool.adopt(made)
            return made
        if reusable is not None:
            if reusable.__class__ is PrefixCachingBlock and (
                prev_block is None or prev_block.__class__ is PrefixCachingBlock
            ):
                reusable._reinit(
                    prev_block,
                    token_ids if owned else list(token_ids),
                    block_id,
                    extra_hash,
                    self,
                )
                return reusable
            pool_id = reusable.pool_id  # type: ignore[attr-defined]
            kwargs = {} if extra_hash is None else {"extra_hash": extra_hash}
            reusable.__init__(  # type: ignore[misc]
                prev_block, token_ids, self._block_size, self, block_id, **kwargs
            )
            reusable.pool_id = pool_id  # type: ignore[attr-defined]
            block: Block = reusable
        else:
            block = pool.init_block(
                prev_block, token_ids, self._block_size, block_id, extra_hash=extra_hash
            )
        if not isinstance(block, PrefixCachingBlock):  # pragma: no cover - pool invariant
            raise TypeError("block pool produced a foreign block")
        block._owner = self
        return block

    # -- allocation ------------------------------------------------------------------------------

    def allocate_mutable_block(
        self, prev_block: Block | None, device: Device | None = None, extra_hash: int | None = None
    ) -> Block:
        """An empty block with a fresh id (evicting if the deque is empty)."""
        check_device_none(device)
        check_extra_hash(extra_hash)
        self._check_prev(prev_block)
        return self._new_block(prev_block, [], self._take_fresh_id(), extra_hash, owned=True)

    def allocate_immutable_block(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        device: Device | None = None,
        extra_hash: int | None = None,
    ) -> Block:
        """A full block: the cached id on a hit, else a fresh id that becomes cached.

        Records one hit or miss, only if the allocation succeeds.
        """
        check_device_none(device)
        check_extra_hash(extra_hash)
        self._check_prev(prev_block)
        tokens = checked_tokens(token_ids)
        (content_hash,) = self._chain_hashes(prev_block, [tokens], extra_hash)
        return self._allocate_immutable(prev_block, tokens, content_hash, extra_hash)

    def _allocate_immutable(
        self,
        prev_block: Block | None,
        tokens: list[int],
        content_hash: PrefixHash,
        extra_hash: int | None,
    ) -> Block:
        """One full block of checked, fresh ``tokens`` (the block keeps that list)."""
        cached_id = self._cached_blocks.get(content_hash)
        if cached_id is not None:
            self.metric_data.query(hit=True)
            self._acquire_cached(cached_id)
            block = self._new_block(prev_block, tokens, cached_id, extra_hash, owned=True)
            block.computed = True  # the object's flag: it took a cached id (as upstream)
        else:
            if not self._hashless_allocator._free_block_indices and not self.evictor.num_blocks:
                raise NoFreeBlocksError()
            self.metric_data.query(hit=False)
            block_id = self._take_fresh_id()
            block = self._new_block(prev_block, tokens, block_id, extra_hash, owned=True)
            self._cache(content_hash, block_id)
        block._cached_content_hash = content_hash
        return block

    def allocate_immutable_blocks(
        self,
        prev_block: Block | None,
        block_token_ids: list[list[int]],
        device: Device | None = None,
        extra_hash: int | None = None,
    ) -> list[Block]:
        """A chain of full blocks, all or nothing: the exact free-count need is checked
        before anything is taken or recorded."""
        check_device_none(device)
        check_extra_hash(extra_hash)
        self._check_prev(prev_block)
        chunks = [
            checked_tokens(tokens) for tokens in checked_list(block_token_ids, "block_token_ids")
        ]
        hashes = self._chain_hashes(prev_block, chunks, extra_hash)
        if self._count_needed(hashes) > self.get_num_free_blocks():
            raise NoFreeBlocksError()
        blocks: list[Block] = []
        for tokens, content_hash in zip(chunks, hashes, strict=True):
            prev_block = self._allocate_immutable(prev_block, tokens, content_hash, extra_hash)
            blocks.append(prev_block)
        return blocks

    def _allocate_table(
        self, full: list[list[int]], tail: list[int], extra_hash: int | None
    ) -> list[Block]:
        """A new block table's blocks, all or nothing (``BlockTable.allocate`` checked the
        arguments): a chain of full blocks for ``full`` (fresh lists of exactly
        ``block_size`` ints; hits and misses recorded as ``allocate_immutable_blocks``
        does), then a mutable block holding ``tail`` (a fresh list shorter than a block;
        none if empty). :class:`NoFreeBlocksError` before any change unless the free count
        covers the chain's exact need plus the tail's block."""
        hash_fn = self._hash_function
        hashes: list[PrefixHash] = []
        prev_hash: PrefixHash | None = None
        for tokens in full:
            prev_hash = hash_fn(prev_hash is None, prev_hash, tokens, extra_hash)
            hashes.append(prev_hash)
        if self._count_needed(hashes) + bool(tail) > self.get_num_free_blocks():
            raise NoFreeBlocksError()
        blocks: list[Block] = []
        prev_block: Block | None = None
        for tokens, content_hash in zip(full, hashes, strict=True):
            prev_block = self._allocate_immutable(prev_block, tokens, content_hash, extra_hash)
            blocks.append(prev_block)
        if tail:
            blocks.append(
                self._new_block(prev_block, tail, self._take_fresh_id(), extra_hash, owned=True)
            )
        return blocks

    def get_num_free_blocks_needed(
        self,
        prev_block: Block | None,
        block_token_ids: Sequence[Sequence[int]],
        extra_hash: int | None = None,
    ) -> int:
        check_extra_hash(extra_hash)
        self._check_prev(prev_block)
        chunks = [
            checked_tokens(tokens) for tokens in checked_list(block_token_ids, "block_token_ids")
        ]
        return self._count_needed(
            self._chain_hashes(prev_block, chunks, extra_hash, chunks_kept=False)
        )

    # -- release and sharing ---------------------------------------------------------------------

    def free(self, block: Block, keep_block_object: bool = False) -> None:
        """Drop the block's reference; a cached id at refcount 0 becomes evictable."""
        block_id = self._check_held(block)
        self._release(block_id, block)
        if type(block) is PrefixCachingBlock:
            block._block_id = None
        else:
            block.block_id = None
        if not keep_block_object:
            self._block_pool.free_block(block)

    def fork(self, last_block: Block) -> list[Block]:
        """New handles sharing every id of the chain ending at ``last_block`` (iterative;
        the whole chain is checked first; free count and trackers are unchanged). Each copy
        keeps its original's content hash and token total: a sliding window's first kept
        block has no predecessor but still counts its dropped prefix, and an id's eviction
        rank must not depend on which of its handles is freed last."""
        chain = get_all_blocks_recursively(check_block(last_block, "last_block"))
        refcounts = self._refcounter._refcounts
        ids: list[BlockId] = []
        for block in chain:
            if (
                type(block) is PrefixCachingBlock
                and block._owner is self
                and (held := block._block_id) is not None
                and refcounts.get(held)
            ):
                ids.append(held)
            else:
                ids.append(forkable_block_id(self, block, refcounts))  # or names the error
        forked: list[Block] = []
        prev: Block | None = None
        for block, block_id in zip(chain, ids, strict=True):
            refcounts[block_id] += 1  # a held id: known, positive count
            if type(block) is PrefixCachingBlock:
                new_block = self._new_block(prev, block._token_ids, block_id, block._extra_hash)
                new_block._cached_content_hash = block._cached_content_hash
                new_block._cached_num_tokens_total = block._cached_num_tokens_total
            else:
                new_block = self._new_block(prev, block.token_ids, block_id, block.extra_hash)
                real = _real_block(block)
                if real is None:
                    new_block._cached_content_hash = None
                else:
                    new_block._cached_content_hash = real._cached_content_hash
                    new_block._cached_num_tokens_total = real._cached_num_tokens_total
            forked.append(new_block)
            prev = new_block
        return forked

    def _share_block_id(self, block: Block, block_id: BlockId) -> None:
        """Give another handle a held id (refcount +1)."""
        self._refcounter.incr(block_id)
        block.block_id = block_id
        block._owner = self  # type: ignore[attr-defined]

    # -- counts and ids --------------------------------------------------------------------------

    def get_num_free_blocks(self, device: Device | None = None) -> int:
        check_device_none(device)
        return len(self._hashless_allocator._free_block_indices) + self.evictor.num_blocks

    def get_num_total_blocks(self) -> int:
        return self._hashless_allocator.get_num_total_blocks()

    def get_physical_block_id(self, absolute_id: int) -> int:
        return self._hashless_allocator.get_physical_block_id(absolute_id)

    @property
    def all_block_ids(self) -> frozenset[int]:
        return self._hashless_allocator.all_block_ids

    def get_block_refcount(self, block_id: int) -> int:
        return self._refcounter.get(block_id)

    def get_prefix_cache_hit_rate(self) -> float:
        return self.metric_data.get_hit_rate()

    def is_block_cached(self, block: Block) -> bool:
        content_hash = block.content_hash
        if content_hash is None:
            raise InvalidBlockError("block has no content hash")
        return content_hash in self._cached_blocks

    # -- promotion and copy-on-write --------------------------------------------------------------

    def promote_to_immutable_block(self, block: Block) -> BlockId:
        """Cache a block that just became full, or move it onto the id already cached
        for its content (its own id is released; no CoW pair is recorded). An evictable id
        cached for that content whose KV was never written gives way instead: moving onto
        it would lose the KV of the block's earlier tokens, which is in its own id."""
        block_id = self._check_held(block)
        content_hash = block.content_hash
        if content_hash is None:
            raise InvalidBlockError("only a full block with a hashed prefix can be promoted")
        cached_id = self._cached_blocks.get(content_hash)
        if cached_id is not None and cached_id in self._unwritten:
            # nobody wrote that id's KV; this block's earlier tokens are in its own id
            self._forget_unwritten(cached_id, content_hash)
            cached_id = None
        if cached_id is None:
            self._cache(content_hash, block_id)
            return block_id
        if cached_id == block_id:
            return block_id
        self._release(block_id, block)
        self._acquire_cached(cached_id)
        block.block_id = cached_id
        block.computed = True
        return cached_id

    def cow_block_if_not_appendable(self, block: Block) -> BlockId:
        """Same id if unshared; else a fresh id (taken first, so running out changes
        nothing), the shared reference dropped, and the pair recorded."""
        src = self._check_held(block)
        if self._refcounter._refcounts[src] <= 1:
            return src
        dst = self._take_fresh_id()
        self._release(src, block)
        self._cow_tracker.record_cow(src, dst)
        return dst

    def clear_copy_on_writes(self) -> list[tuple[BlockId, BlockId]]:
        return self._cow_tracker.clear_cows()

    # -- access times and computed marks -----------------------------------------------------------

    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None:
        """Set the access time of active ids (tracker) and evictable ids (evictor).

        An unknown or non-int id raises :class:`UnknownBlockIdError` (a ``KeyError``); a
        free id :class:`InvalidBlockError` (a ``ValueError``); both before any update.
        """
        if block_ids.__class__ is not list:
            block_ids = checked_list(block_ids, "block_ids")
        if now.__class__ is not float or now != now:  # a non-NaN float passes check_time
            check_time(now)
        tracker_at = self._tracker_at
        if tracker_at is not None:
            # The common case: every id is held and is this allocator's own id object
            # (BlockTracker.held), checked for all before any is stamped. Anything else
            # (an evictable, free, foreign, negative or non-int id) leaves for the checking
            # pass below, which accepts or refuses it before any update.
            try:
                for block_id in block_ids:
                    if tracker_at[block_id].held is not block_id:  # type: ignore[union-attr]
                        break
                else:
                    for block_id in block_ids:
                        tracker_at[block_id].last_accessed = now  # type: ignore[union-attr]
                    return
            except (IndexError, TypeError, AttributeError):  # off the list, not an index
                pass
        trackers = self._block_tracker
        evictor = self.evictor
        active: list[BlockTracker] = []
        evictable: list[BlockId] = []
        for block_id in block_ids:
            if block_id.__class__ is not int:
                check_block_id(block_id)
            tracker = trackers.get(block_id)
            if tracker is None:
                raise UnknownBlockIdError(f"block id {block_id} does not belong to this allocator")
            if tracker.active:
                active.append(tracker)
            elif block_id in evictor:
                evictable.append(block_id)
            else:
                raise InvalidBlockError(f"block id {block_id} is free; it cannot be accessed")
        for tracker in active:
            tracker.last_accessed = now
        for block_id in evictable:
            evictor.update(block_id, now)

    def mark_blocks_as_computed(self, block_ids: list[int]) -> None:
        """Mark every id promoted since the last call as computed (the argument is
        ignored, as upstream), then forget them."""
        trackers = self._block_tracker
        for block_id in self._touched_blocks:
            trackers[block_id].computed = True
        self._touched_blocks.clear()

    def block_is_computed(self, block_id: int) -> bool:
        tracker = self._block_tracker.get(check_block_id(block_id))
        if tracker is None:
            raise UnknownBlockIdError(f"block id {block_id} does not belong to this allocator")
        if tracker.active:
            return tracker.computed
        return block_id in self.evictor and block_id not in self._unwritten

    def get_computed_block_ids(
        self,
        prev_computed_block_ids: list[int],
        block_ids: list[int],
        skip_last_block_id: bool = True,
    ) -> list[int]:
        """Append to ``prev_computed_block_ids`` (and return it) the leading run of later
        ids of ``block_ids`` that are computed, optionally ignoring the last id.

        Stops at the first id that is not computed (upstream skips it and goes on): an
        engine skips ``len(result) * block_size`` tokens, so the result must be a prefix."""
        prev_computed_block_ids = checked_list(prev_computed_block_ids, "prev_computed_block_ids")
        block_ids = checked_list(block_ids, "block_ids")
        prev_size = len(prev_computed_block_ids)
        cur_size = len(block_ids) - (1 if skip_last_block_id else 0)
        if cur_size < 0:
            raise InvalidArgumentError("block_ids is empty but its last id is to be skipped")
        if prev_size > cur_size:
            raise InvalidArgumentError("more previously computed ids than ids to consider")
        considered = block_ids[prev_size:cur_size]
        flags = [self.block_is_computed(block_id) for block_id in considered]  # checks all ids
        run = flags.index(False) if False in flags else len(flags)
        prev_computed_block_ids.extend(considered[:run])
        return prev_computed_block_ids

    def get_common_computed_block_ids(self, computed_seq_block_ids: list[list[int]]) -> list[int]:
        """Upstream's quirks: one list -> that same object; otherwise the common prefix of
        the non-empty lists; ``''`` when there is none."""
        seqs = [
            checked_list(ids, "computed_seq_block_ids items")
            for ids in checked_list(computed_seq_block_ids, "computed_seq_block_ids")
        ]
        if len(seqs) == 1:
            return seqs[0]
        lists = [ids for ids in seqs if ids]
        if not lists:
            return _EMPTY_COMMON_PREFIX
        first = lists[0]
        length = len(first)
        for other in lists[1:]:
            length = min(length, len(other))
            index = 0
            while index < length and first[index] == other[index]:
                index += 1
            length = index
        return first[:length]

    def find_cached_blocks_prefix(self, block_hashes: list[int]) -> list[int]:
        """The longest leading run of ``block_hashes`` that are cached on computed ids
        (evictable ids count). A linear scan: exact even if the cache is not
        prefix-closed, O(k) in the hashes examined."""
        block_hashes = checked_list(block_hashes, "block_hashes")
        length = 0
        for content_hash in block_hashes:
            block_id = self._cached_blocks.get(content_hash)
            if block_id is None or not self.block_is_computed(block_id):
                break
            length += 1
        return block_hashes[:length]

    def reset_prefix_cache(self) -> bool:
        """Evict every cached id back to the free deque and reset metrics, trackers of
        those ids and the touched set; ``False`` (and no change) while any block is used."""
        in_use = self.get_num_total_blocks() - self.get_num_free_blocks()
        if in_use > 0:
            logger.warning("cannot reset the prefix cache: %d blocks are still in use", in_use)
            return False
        free_ids = self._hashless_allocator._free_block_indices
        while self.evictor.num_blocks:
            block_id, _ = self.evictor.evict()
            tracker = self._block_tracker[block_id]
            tracker.reset()
            tracker.content_hash = None
            free_ids.appendleft(tracker.block_id)  # the id object, not the evictor's copy
        self._cached_blocks.clear()
        self._touched_blocks.clear()
        self._unwritten.clear()
        self.evictor = make_evictor(self.eviction_policy)
        self.metric_data = CacheMetricData()
        return True

    # -- swap support ------------------------------------------------------------------------------

    def get_num_blocks_touched(self, blocks: list[Block], num_lookahead_slots: int = 0) -> int:
        """Upstream's swap-in estimate: a non-full block costs 1 plus the blocks its
        lookahead overflows into; a full block 1 unless its content is cached on an
        active id. Blocks are not de-duplicated (an over-estimate, never an under-)."""
        blocks = checked_blocks(blocks)
        check_count(num_lookahead_slots, "num_lookahead_slots")
        touched = 0
        for block in blocks:
            if not block.is_full:
                touched += 1
                if num_lookahead_slots > block.num_empty_slots:
                    touched += cdiv(num_lookahead_slots - block.num_empty_slots, self._block_size)
            elif not self._full_block_is_resident(block):
                touched += 1
        return touched

    def get_num_full_blocks_touched(self, blocks: list[Block]) -> int:
        """Full blocks whose content is not cached on an active id (not de-duplicated)."""
        return sum(
            1
            for block in checked_blocks(blocks)
            if block.is_full and not self._full_block_is_resident(block)
        )

    def _full_block_is_resident(self, block: Block) -> bool:
        content_hash = block.content_hash
        return content_hash is not None and self._is_active_cached(content_hash)

    def get_num_free_blocks_needed_for_swap_in(self, blocks: Sequence[Block]) -> int:
        needed = 0
        hashes: list[PrefixHash] = []
        for block in blocks:
            content_hash = block.content_hash if block.is_full else None
            if content_hash is None:
                needed += 1
            else:
                hashes.append(content_hash)
        return needed + self._count_needed(hashes)

    def swap_out(self, blocks: list[Block]) -> None:
        """Release every block's id, keeping the objects; cached ids that reach refcount
        0 become evictable here. All blocks are checked first."""
        blocks = checked_blocks(blocks)
        check_no_duplicate_objects(blocks)
        ids = [self._check_held(block) for block in blocks]
        for block_id, handles in Counter(ids).items():
            if handles > self._refcounter.get(block_id):
                raise InvalidBlockError(f"more handles of id {block_id} than references")
        for block, block_id in zip(blocks, ids, strict=True):
            self._release(block_id, block)
            block.block_id = None

    def swap_in(self, blocks: list[Block]) -> None:
        """Give each id-less block an id of this device, in order: a full hashed block
        by content (its cached id, else a fresh id cached under it), any other a fresh id.
        A swap-in re-registers blocks the engine already holds; it is not a cache query,
        so the hit-rate counters do not move (upstream counts it: a defect).

        All or nothing: the exact free-count need is checked first. The objects keep
        referring to the allocator that created them; this allocator now holds them.
        """
        blocks = checked_blocks(blocks)
        check_no_duplicate_objects(blocks)
        for block in blocks:
            if block.block_id is not None:
                raise SwapError("a block to swap in must not hold an id (swap it out first)")
            if len(block.token_ids) > self._block_size:
                raise BlockFullError("block holds more tokens than this allocator's block size")
        if self.get_num_free_blocks_needed_for_swap_in(blocks) > self.get_num_free_blocks():
            raise NoFreeBlocksError()
        for block in blocks:
            content_hash = block.content_hash if block.is_full else None
            if content_hash is None:
                block_id = self._take_fresh_id()
            else:
                cached_id = self._cached_blocks.get(content_hash)
                if cached_id is not None:
                    self._acquire_cached(cached_id)
                    block_id = cached_id
                else:
                    block_id = self._take_fresh_id()
                    self._cache(content_hash, block_id)
            block.block_id = block_id
            block._owner = self  # type: ignore[attr-defined]


class _SequenceLike(Protocol):
    """What :class:`ComputedBlocksTracker` reads from a vLLM-style sequence."""

    seq_id: int

    def get_token_ids(self) -> list[int]: ...

    def extra_hash(self) -> int | None: ...

    def is_prefill(self) -> bool: ...


def _tracker_hash_function(allocator: object) -> HashFunction:
    """The hash the allocator (or a device-aware allocator's GPU side) keys blocks with."""
    if type(allocator) is PrefixCachingBlockAllocator or issubclass(
        type(allocator), PrefixCachingBlockAllocator
    ):
        return cast(PrefixCachingBlockAllocator, allocator)._hash_function
    from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator

    if issubclass(type(allocator), CpuGpuBlockAllocator):
        gpu = cast(CpuGpuBlockAllocator, allocator)._allocators[Device.GPU]
        return _owner_hash_function(gpu)
    return default_hash_function


class ComputedBlocksTracker:
    """Per-sequence cache of computed-prefix information, in both upstream flavours.

    Aphrodite (``add_seq`` / ``get_cached_computed_blocks_and_update``): remembers each
    sequence's computed block ids, extending them through ``get_computed_block_ids``
    (last id skipped) until a gap appears. vLLM (``block_size`` given;
    ``get_num_cached_tokens(seq)``): hashes each sequence's full blocks incrementally
    (with ``seq.extra_hash()``) and reports ``len(find_cached_blocks_prefix) *
    block_size``, frozen while the sequence is in prefill.
    """

    def __init__(
        self, allocator: Any, block_size: int | None = None, enable_caching: bool = True
    ) -> None:
        if block_size is not None:
            check_block_size(block_size)
        self._allocator = allocator
        self._block_size = block_size
        self._enable_caching = enable_caching
        self._cached_computed_seq_blocks: dict[int, tuple[list[int], bool]] = {}
        self._seq_id_to_blocks_hashes: dict[int, list[int]] = {}
        self._seq_id_to_num_tokens_computed: dict[int, int] = {}

    def add_seq(self, seq_id: int) -> None:
        if seq_id in self._cached_computed_seq_blocks:
            raise InvalidArgumentError(f"sequence {seq_id} is already tracked")
        self._cached_computed_seq_blocks[seq_id] = ([], False)

    def remove_seq(self, seq_id: int) -> None:
        found = False
        for table in (
            self._cached_computed_seq_blocks,
            self._seq_id_to_blocks_hashes,
            self._seq_id_to_num_tokens_computed,
        ):
            if seq_id in table:
                del table[seq_id]
                found = True
        if not found and self._enable_caching:
            raise InvalidArgumentError(f"sequence {seq_id} is not tracked")

    def get_cached_computed_blocks_and_update(self, seq_id: int, block_ids: list[int]) -> list[int]:
        entry = self._cached_computed_seq_blocks.get(seq_id)
        if entry is None:
            raise InvalidArgumentError(f"sequence {seq_id} is not tracked")
        prev_computed, has_gap = entry
        if has_gap:
            return prev_computed
        num_cur_blocks = len(block_ids) - 1
        if num_cur_blocks < 0:
            raise InvalidArgumentError("a tracked sequence has at least one block")
        if len(prev_computed) >= num_cur_blocks:
            if len(prev_computed) != num_cur_blocks:
                raise InvalidArgumentError("the sequence lost blocks since the last call")
            return prev_computed
        computed = self._allocator.get_computed_block_ids(
            prev_computed, block_ids, skip_last_block_id=True
        )
        self._cached_computed_seq_blocks[seq_id] = (computed, len(computed) < num_cur_blocks)
        return cast("list[int]", computed)

    def _update_seq_hashes(self, seq: _SequenceLike, block_size: int) -> list[int]:
        hashes = self._seq_id_to_blocks_hashes.setdefault(seq.seq_id, [])
        token_ids = seq.get_token_ids()
        num_full = len(token_ids) // block_size
        if len(hashes) < num_full:
            hash_fn = _tracker_hash_function(self._allocator)
            extra_hash = seq.extra_hash()
            prev_hash = hashes[-1] if hashes else None
            for index in range(len(hashes), num_full):
                chunk = token_ids[index * block_size : (index + 1) * block_size]
                prev_hash = hash_fn(prev_hash is None, prev_hash, chunk, extra_hash)
                hashes.append(prev_hash)
        return hashes

    def get_num_cached_tokens(self, seq: _SequenceLike) -> int:
        if not self._enable_caching:
            return 0
        if self._block_size is None:
            raise InvalidArgumentError("get_num_cached_tokens needs a tracker with a block_size")
        hashes = self._update_seq_hashes(seq, self._block_size)
        frozen = self._seq_id_to_num_tokens_computed.get(seq.seq_id)
        if frozen is not None and seq.is_prefill():
            return frozen
        num_cached = len(self._allocator.find_cached_blocks_prefix(hashes)) * self._block_size
        self._seq_id_to_num_tokens_computed[seq.seq_id] = num_cached
        return num_cached


class LastAccessBlocksTracker:
    """Remembers each sequence's last access time and stamps its blocks with it."""

    def __init__(self, allocator: Any) -> None:
        self._allocator = allocator
        self._seq_last_access: dict[int, float | None] = {}

    def add_seq(self, seq_id: int) -> None:
        if seq_id in self._seq_last_access:
            raise InvalidArgumentError(f"sequence {seq_id} is already tracked")
        self._seq_last_access[seq_id] = None

    def remove_seq(self, seq_id: int) -> None:
        if seq_id not in self._seq_last_access:
            raise InvalidArgumentError(f"sequence {seq_id} is not tracked")
        del self._seq_last_access[seq_id]

    def update_last_access(self, seq_id: int, time: float) -> None:
        if seq_id not in self._seq_last_access:
            raise InvalidArgumentError(f"sequence {seq_id} is not tracked")
        self._seq_last_access[seq_id] = check_time(time)

    def update_seq_blocks_last_access(self, seq_id: int, block_ids: list[int]) -> None:
        if seq_id not in self._seq_last_access:
            raise InvalidArgumentError(f"sequence {seq_id} is not tracked")
        time = self._seq_last_access[seq_id]
        if time is not None:
            self._allocator.mark_blocks_as_accessed(block_ids, time)
