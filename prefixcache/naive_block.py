"""The naive allocator: no content sharing, only refcounts and copy-on-write.

Free ids live in a deque. Allocation pops from the left, a freed id (refcount reaching
0) is pushed on the left, so it is the next one handed out. Every operation is O(1) or
O(k) in the k blocks it is given; failures leave the allocator unchanged.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence

from prefixcache._validation import (
    check_block,
    check_block_size,
    check_count,
    check_device_none,
    check_extra_hash,
    checked_block_ids,
    checked_block_tokens,
    checked_blocks,
    checked_list,
    checked_tokens,
)
from prefixcache.common import (
    BlockPool,
    CopyOnWriteTracker,
    RefCounter,
    get_all_blocks_recursively,
)
from prefixcache.errors import (
    BlockFullError,
    DoubleFreeError,
    ForkError,
    InvalidArgumentError,
    InvalidBlockError,
    NoFreeBlocksError,
    SwapError,
    UnknownBlockIdError,
)
from prefixcache.interfaces import Block, BlockAllocator, BlockId
from prefixcache.utils import Device, cdiv

__all__ = ["NaiveBlock", "NaiveBlockAllocator"]


class NaiveBlock(Block):
    """A block that stores tokens and an id; it has no content hash.

    ``append_token_ids`` asks the allocator for copy-on-write *before* it adds the
    tokens (when the block holds an id), so a failed copy leaves the block unchanged.
    The check runs even for an empty list: an empty append on a shared block copies it.
    ``_cow_target`` is the block handed to the allocator for that check (a wrapping
    block passes itself).
    """

    __slots__ = (
        "_allocator",
        "_block_id",
        "_block_size",
        "_cow_target",
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
        _cow_target: Block | None = None,
        extra_hash: int | None = None,
    ) -> None:
        self._token_ids = checked_block_tokens(token_ids, block_size)
        self._block_size = block_size
        self._prev_block = prev_block
        self._block_id = block_id
        self._allocator = allocator
        self._cow_target: Block = _cow_target if _cow_target is not None else self
        self._owner: BlockAllocator | None = None

    def append_token_ids(self, token_ids: list[int]) -> None:
        tokens = checked_tokens(token_ids)
        if len(tokens) > self._block_size - len(self._token_ids):
            raise BlockFullError(
                f"{len(tokens)} tokens do not fit {self.num_empty_slots} empty slots"
            )
        if self._block_id is not None:
            target = self._owner if self._owner is not None else self._allocator
            self._block_id = target.cow_block_if_not_appendable(self._cow_target)
        self._token_ids.extend(tokens)

    @property
    def block_id(self) -> int | None:
        return self._block_id

    @block_id.setter
    def block_id(self, value: int | None) -> None:
        self._block_id = value

    @property
    def token_ids(self) -> list[int]:
        return self._token_ids

    @property
    def num_empty_slots(self) -> int:
        return self._block_size - len(self._token_ids)

    @property
    def is_full(self) -> bool:
        return len(self._token_ids) == self._block_size

    @property
    def block_size(self) -> int:
        return self._block_size

    @property
    def prev_block(self) -> Block | None:
        return self._prev_block

    @property
    def extra_hash(self) -> int | None:
        return None

    @property
    def content_hash(self) -> int | None:
        return None

    @property
    def num_tokens_total(self) -> int:
        raise NotImplementedError("num_tokens_total is not used by the naive block")

    @property
    def computed(self) -> bool:
        raise NotImplementedError

    @computed.setter
    def computed(self, value: bool) -> None:
        raise NotImplementedError

    @property
    def last_accessed(self) -> float:
        raise NotImplementedError

    @last_accessed.setter
    def last_accessed(self, last_accessed_ts: float) -> None:
        raise NotImplementedError


def check_no_duplicate_objects(blocks: Sequence[Block]) -> None:
    """The same block object must not appear twice in one request."""
    if len({id(block) for block in blocks}) != len(blocks):
        raise InvalidArgumentError("the same block object appears more than once")


def held_block_id(owner: object, block: Block, refcounts: dict[BlockId, int]) -> BlockId:
    """The id of ``block`` if ``owner`` holds it: ``owner`` gave it its id (``_owner``),
    the id is set, known and has a positive refcount. Otherwise a typed error:
    :class:`InvalidArgumentError` (not a block at all), :class:`InvalidBlockError`
    (foreign, never allocated, stale), :class:`DoubleFreeError` (already freed),
    :class:`UnknownBlockIdError` (an id ``owner`` does not own)."""
    block_owner = getattr(block, "_owner", None)
    if block_owner is not owner:
        check_block(block)
        if block_owner is None and block.block_id is None:
            raise InvalidBlockError("block was never allocated")
        raise InvalidBlockError("block is not held by this allocator")
    block_id = block.block_id
    if block_id is None:
        raise DoubleFreeError("block holds no id (already freed)")
    count = refcounts.get(block_id)
    if count is None:
        raise UnknownBlockIdError(f"block id {block_id} does not belong to this allocator")
    if count == 0:
        raise InvalidBlockError(f"stale block handle: id {block_id} has refcount 0")
    return block_id


def forkable_block_id(owner: object, block: Block, refcounts: dict[BlockId, int]) -> BlockId:
    """Like :func:`held_block_id`, but a freed or stale block of ``owner`` is a
    :class:`ForkError`."""
    try:
        return held_block_id(owner, block, refcounts)
    except UnknownBlockIdError:
        raise
    except InvalidBlockError as exc:
        if getattr(block, "_owner", None) is owner:
            raise ForkError("cannot fork a chain containing a freed block") from exc
        raise


class NaiveBlockAllocator(BlockAllocator):
    """Allocates ids with refcounting and copy-on-write; never shares by content.

    ``_free_block_indices`` is the free deque (given order; freed ids go to the left).
    A block handle is *held* by this allocator when this allocator gave it its id
    (``_owner``), its id is set, and the id's refcount is positive; every operation on
    an existing block checks that first and raises a typed error otherwise.

    ``prev_block`` must be ``None`` or an instance of the block class this allocator
    builds (``create_block`` when it is a :class:`Block` subclass, else any block).
    """

    def __init__(
        self,
        create_block: Callable[..., Block],
        num_blocks: int,
        block_size: int,
        block_ids: Iterable[int] | None = None,
        block_pool: BlockPool | None = None,
    ) -> None:
        check_count(num_blocks, "num_blocks")
        check_block_size(block_size)
        ids = (
            list(range(num_blocks))
            if block_ids is None
            else checked_block_ids(block_ids, num_blocks)
        )
        self._block_size = block_size
        self._create_block = create_block
        self._prev_block_type: type[Block] = (
            create_block
            if isinstance(create_block, type) and issubclass(create_block, Block)
            else Block
        )
        self._free_block_indices: deque[BlockId] = deque(ids)
        self._all_block_indices: frozenset[BlockId] = frozenset(ids)
        ordered = sorted(ids)
        # Contiguous ids (the usual case) map to physical ids by subtraction; any other
        # id set through a precomputed dict. Both are O(1) per lookup.
        self._id_base = ordered[0] if ordered else 0
        self._ids_contiguous = not ordered or ordered[-1] - ordered[0] + 1 == len(ordered)
        self._physical_index: dict[BlockId, int] = (
            {} if self._ids_contiguous else {block_id: i for i, block_id in enumerate(ordered)}
        )
        self._refcounter = RefCounter(ids)
        self._cow_tracker = CopyOnWriteTracker(self._refcounter.as_readonly())
        self._block_pool = (
            block_pool
            if block_pool is not None
            else BlockPool(block_size, create_block, self, num_blocks * 4)
        )

    # -- internal primitives ------------------------------------------------------------

    def _check_held(self, block: Block) -> BlockId:
        return held_block_id(self, block, self._refcounter._refcounts)

    def _take_id(self) -> BlockId:
        if not self._free_block_indices:
            raise NoFreeBlocksError()
        block_id = self._free_block_indices.popleft()
        self._refcounter.incr(block_id)
        return block_id

    def _release_id(self, block_id: BlockId) -> None:
        if self._refcounter.decr(block_id) == 0:
            self._free_block_indices.appendleft(block_id)

    def _share_block_id(self, block: Block, block_id: BlockId) -> None:
        """Give another handle a held id (refcount +1)."""
        self._refcounter.incr(block_id)
        block.block_id = block_id
        block._owner = self  # type: ignore[attr-defined]

    def _new_block(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        block_id: BlockId | None,
        extra_hash: int | None = None,
    ) -> Block:
        block = self._block_pool.init_block(
            prev_block, token_ids, self._block_size, block_id, extra_hash=extra_hash
        )
        block._owner = self  # type: ignore[attr-defined]
        return block

    def _check_prev(self, prev_block: object) -> None:
        if prev_block is not None and not isinstance(prev_block, self._prev_block_type):
            raise InvalidArgumentError(
                f"prev_block must be a {self._prev_block_type.__name__} or None, "
                f"got {type(prev_block).__name__}"
            )

    def _check_fits(self, tokens: list[int]) -> None:
        if len(tokens) > self._block_size:
            raise BlockFullError(
                f"{len(tokens)} tokens do not fit a block of size {self._block_size}"
            )

    # -- allocation ---------------------------------------------------------------------

    def allocate_mutable_block(
        self, prev_block: Block | None, device: Device | None = None, extra_hash: int | None = None
    ) -> Block:
        check_device_none(device)
        check_extra_hash(extra_hash)
        self._check_prev(prev_block)
        if not self._free_block_indices:
            raise NoFreeBlocksError()
        block = self._new_block(prev_block, [], None, extra_hash)
        block.block_id = self._take_id()
        return block

    def allocate_immutable_block(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        device: Device | None = None,
        extra_hash: int | None = None,
    ) -> Block:
        check_device_none(device)
        check_extra_hash(extra_hash)
        self._check_prev(prev_block)
        tokens = checked_tokens(token_ids)
        self._check_fits(tokens)
        if not self._free_block_indices:
            raise NoFreeBlocksError()
        block = self._new_block(prev_block, tokens, None, extra_hash)
        block.block_id = self._take_id()
        return block

    def allocate_immutable_blocks(
        self,
        prev_block: Block | None,
        block_token_ids: list[list[int]],
        device: Device | None = None,
        extra_hash: int | None = None,
    ) -> list[Block]:
        """All or nothing: checks every chunk and the free count before taking an id."""
        check_device_none(device)
        check_extra_hash(extra_hash)
        self._check_prev(prev_block)
        chunks = [
            checked_tokens(tokens) for tokens in checked_list(block_token_ids, "block_token_ids")
        ]
        for tokens in chunks:
            self._check_fits(tokens)
        if len(chunks) > len(self._free_block_indices):
            raise NoFreeBlocksError()
        blocks: list[Block] = []
        for tokens in chunks:
            prev_block = self._new_block(prev_block, tokens, self._take_id(), extra_hash)
            blocks.append(prev_block)
        return blocks

    # -- release and sharing --------------------------------------------------------------

    def free(self, block: Block, keep_block_object: bool = False) -> None:
        block_id = self._check_held(block)
        self._release_id(block_id)
        block.block_id = None
        if not keep_block_object:
            self._block_pool.free_block(block)

    def free_block_id(self, block_id: BlockId) -> None:
        """Drop one reference to ``block_id``; at 0 it returns to the free deque."""
        if self._refcounter.get(block_id) == 0:
            raise DoubleFreeError(f"block id {block_id} is already free")
        self._release_id(block_id)

    def fork(self, last_block: Block) -> list[Block]:
        """New handles sharing every id of the chain ending at ``last_block``.

        Iterative (any chain length). Checks the whole chain first: a block of another
        allocator raises :class:`InvalidBlockError`, a freed one :class:`ForkError`.
        """
        chain = get_all_blocks_recursively(check_block(last_block, "last_block"))
        ids = [forkable_block_id(self, block, self._refcounter._refcounts) for block in chain]
        forked: list[Block] = []
        prev: Block | None = None
        for block, block_id in zip(chain, ids, strict=True):
            self._refcounter.incr(block_id)
            prev = self._new_block(prev, block.token_ids, block_id, block.extra_hash)
            forked.append(prev)
        return forked

    # -- counts and ids -------------------------------------------------------------------

    def get_num_free_blocks(self, device: Device | None = None) -> int:
        check_device_none(device)
        return len(self._free_block_indices)

    def get_num_total_blocks(self) -> int:
        return len(self._all_block_indices)

    def get_physical_block_id(self, absolute_id: int) -> int:
        """Rank of ``absolute_id`` among this allocator's ids (O(1), no sorting)."""
        if type(absolute_id) is int:
            if self._ids_contiguous:
                offset = absolute_id - self._id_base
                if 0 <= offset < len(self._all_block_indices):
                    return offset
            else:
                found = self._physical_index.get(absolute_id)
                if found is not None:
                    return found
        raise UnknownBlockIdError(f"block id {absolute_id!r} does not belong to this allocator")

    @property
    def all_block_ids(self) -> frozenset[int]:
        return self._all_block_indices

    @property
    def refcounter(self) -> RefCounter:
        return self._refcounter

    def get_block_refcount(self, block_id: int) -> int:
        return self._refcounter.get(block_id)

    # -- copy-on-write ----------------------------------------------------------------------

    def cow_block_if_not_appendable(self, block: Block) -> BlockId:
        """Same id if the block is not shared; else a fresh id, recorded as a CoW pair.

        The fresh id is taken before the shared reference is dropped, so running out of
        blocks leaves everything unchanged.
        """
        src = self._check_held(block)
        if self._refcounter.get(src) <= 1:
            return src
        dst = self._take_id()
        self._release_id(src)
        self._cow_tracker.record_cow(src, dst)
        return dst

    def clear_copy_on_writes(self) -> list[tuple[BlockId, BlockId]]:
        return self._cow_tracker.clear_cows()

    def promote_to_immutable_block(self, block: Block) -> BlockId:
        raise NotImplementedError("the naive allocator has no immutable blocks")

    # -- prefix-cache bookkeeping (no-ops here) --------------------------------------------

    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None:
        pass

    def mark_blocks_as_computed(self, block_ids: list[int]) -> None:
        pass

    def get_computed_block_ids(
        self,
        prev_computed_block_ids: list[int],
        block_ids: list[int],
        skip_last_block_id: bool = True,
    ) -> list[int]:
        return []

    def get_common_computed_block_ids(self, computed_seq_block_ids: list[list[int]]) -> list[int]:
        return []

    def get_prefix_cache_hit_rate(self) -> float:
        return -1

    def reset_prefix_cache(self) -> bool:
        return True

    def find_cached_blocks_prefix(self, block_hashes: list[int]) -> list[int]:
        return []

    # -- swap support ----------------------------------------------------------------------

    def get_num_blocks_touched(self, blocks: list[Block], num_lookahead_slots: int = 0) -> int:
        """Upstream's estimate: with lookahead, a non-full block costs 1 plus the blocks
        its lookahead overflows into; every other block counts once per distinct id."""
        blocks = checked_blocks(blocks)
        check_count(num_lookahead_slots, "num_lookahead_slots")
        distinct_ids: set[int | None] = set()
        new_blocks = 0
        for block in blocks:
            if num_lookahead_slots and not block.is_full:
                new_blocks += 1
                if num_lookahead_slots > block.num_empty_slots:
                    new_blocks += cdiv(
                        num_lookahead_slots - block.num_empty_slots, self._block_size
                    )
            else:
                distinct_ids.add(block.block_id)
        return new_blocks + len(distinct_ids)

    def get_num_full_blocks_touched(self, blocks: list[Block]) -> int:
        """Full blocks, each block object counted once."""
        return len({id(block) for block in checked_blocks(blocks) if block.is_full})

    def get_num_free_blocks_needed(
        self,
        prev_block: Block | None,
        block_token_ids: Sequence[Sequence[int]],
        extra_hash: int | None = None,
    ) -> int:
        return len(checked_list(block_token_ids, "block_token_ids"))

    def get_num_free_blocks_needed_for_swap_in(self, blocks: Sequence[Block]) -> int:
        return len(blocks)

    def _check_swap_out(self, blocks: Sequence[Block]) -> list[BlockId]:
        blocks = checked_blocks(blocks)
        check_no_duplicate_objects(blocks)
        ids = [self._check_held(block) for block in blocks]
        for block_id, handles in Counter(ids).items():
            if handles > self._refcounter.get(block_id):
                raise InvalidBlockError(f"more handles of id {block_id} than references")
        return ids

    def swap_out(self, blocks: list[Block]) -> None:
        """Free every block's id, keeping the objects (all checked first)."""
        ids = self._check_swap_out(blocks)
        for block, block_id in zip(blocks, ids, strict=True):
            self._release_id(block_id)
            block.block_id = None

    def _check_swap_in(self, blocks: Sequence[Block]) -> None:
        blocks = checked_blocks(blocks)
        check_no_duplicate_objects(blocks)
        for block in blocks:
            if block.block_id is not None:
                raise SwapError("a block to swap in must not hold an id (swap it out first)")
            if len(block.token_ids) > self._block_size:
                raise BlockFullError("block holds more tokens than this allocator's block size")

    def swap_in(self, blocks: list[Block]) -> None:
        """Give every block a fresh id of this device (all or nothing)."""
        self._check_swap_in(blocks)
        if len(blocks) > len(self._free_block_indices):
            raise NoFreeBlocksError()
        for block in blocks:
            block.block_id = self._take_id()
            block._owner = self  # type: ignore[attr-defined]
