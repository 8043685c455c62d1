"""A sequence's block table: the blocks holding its tokens, in order.

Operations that take blocks (``allocate``, ``append_token_ids``,
``ensure_num_empty_slots``) first work out exactly how many free blocks they consume
(fresh blocks plus copy-on-write copies; a promotion onto a duplicate is counted as
free-count-neutral) and raise :class:`NoFreeBlocksError` before changing anything if
the device cannot supply them. Every argument (tokens, counts, ``extra_hash``, the
window's ``num_computed_slots``) is validated before that, and ``free`` and the window
drop check that every block they release is still held. On failure the table's
blocks, ``num_full_slots`` and the allocator are unchanged.
"""

from __future__ import annotations

import contextlib
import operator
from collections import Counter
from typing import cast

from prefixcache._validation import (
    check_block_size,
    check_count,
    check_extra_hash,
    check_positive,
    checked_tokens,
)
from prefixcache.common import BlockList
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.errors import (
    DoubleFreeError,
    ForkError,
    InvalidArgumentError,
    InvalidBlockError,
    NoFreeBlocksError,
)
from prefixcache.interfaces import Block, DeviceAwareBlockAllocator
from prefixcache.naive_block import NaiveBlock
from prefixcache.prefix_caching_block import PrefixCachingBlock, PrefixCachingBlockAllocator
from prefixcache.utils import Device, cdiv, chunk_list

__all__ = ["BlockTable"]

_block_id_of = operator.attrgetter("block_id")
_JUST_INT = frozenset((int,))
_BUNDLED_BLOCKS = (PrefixCachingBlock, NaiveBlock)


def _detach_prev(block: Block) -> None:
    """Make ``block`` the first of its chain (its predecessor left the window). A content
    hash is computed first and kept, so the block keeps its identity; the token total is
    cached already. A third-party block class keeps its link (it has no setter)."""
    if isinstance(block, PrefixCachingBlock):
        block.content_hash  # noqa: B018 - memoises the hash while the predecessor is known
        block._prev_block = None
    elif isinstance(block, NaiveBlock):
        block._prev_block = None


class BlockTable:
    """Maps a sequence's token positions to blocks of a device-aware allocator.

    ``num_full_slots`` counts the tokens written; the table is *allocated* when it holds
    at least one block. With ``max_block_sliding_window`` set (a positive int),
    ``append_token_ids`` swaps blocks that fell out of the window for the allocator's
    null block; the last block is never dropped, so a new block is never chained to the
    null block.
    """

    def __init__(
        self,
        block_size: int,
        block_allocator: DeviceAwareBlockAllocator,
        _blocks: list[Block] | None = None,
        max_block_sliding_window: int | None = None,
    ) -> None:
        check_block_size(block_size)
        if max_block_sliding_window is not None:
            check_positive(max_block_sliding_window, "max_block_sliding_window")
        self._block_size = block_size
        self._allocator = block_allocator
        self._blocks = BlockList(_blocks if _blocks is not None else [])
        self._max_block_sliding_window = max_block_sliding_window
        self._num_full_slots = self._get_num_token_ids()

    @staticmethod
    def get_num_required_blocks(
        token_ids: list[int], block_size: int, num_lookahead_slots: int = 0
    ) -> int:
        """Blocks needed to hold ``token_ids`` plus ``num_lookahead_slots``."""
        return cdiv(len(token_ids) + num_lookahead_slots, block_size)

    # -- allocation ------------------------------------------------------------------------

    def allocate(
        self, token_ids: list[int], device: Device = Device.GPU, extra_hash: int | None = None
    ) -> None:
        """Fill a fresh table: full chunks as immutable (shareable) blocks, a partial
        tail as one mutable block. All or nothing."""
        if self._is_allocated:
            raise InvalidArgumentError("the block table is already allocated")
        check_extra_hash(extra_hash)
        tokens = checked_tokens(token_ids)
        if not tokens:
            raise InvalidArgumentError("cannot allocate a block table for no tokens")
        full, tail = self._split_full(tokens)
        allocator = self._allocator
        if type(allocator) is CpuGpuBlockAllocator:
            device_allocator = allocator._allocator_for(device)
            if (
                type(device_allocator) is PrefixCachingBlockAllocator
                and device_allocator._block_size == self._block_size
            ):
                # Checked once here; the bundled allocator hashes and counts once, and every
                # block it returns has just taken an id (no re-check per block).
                blocks = device_allocator._allocate_table(full, tail, extra_hash)
                block_list = self._blocks
                block_list._blocks = blocks
                block_list._block_ids = [block._block_id for block in blocks]  # type: ignore[attr-defined]
                self._num_full_slots = len(tokens)
                return
        needed = self._needed_for_immutable(full, device, extra_hash)
        if needed is not None and needed + bool(tail) > self._allocator.get_num_free_blocks(device):
            raise NoFreeBlocksError()
        blocks = self._allocate_chunks(None, full, tail, device, extra_hash)
        self.update(blocks)
        self._num_full_slots = len(tokens)

    def _needed_for_immutable(
        self, full_chunks: list[list[int]], device: Device, extra_hash: int | None
    ) -> int | None:
        try:
            return self._allocator.get_num_free_blocks_needed(None, full_chunks, device, extra_hash)
        except NotImplementedError:  # a third-party allocator without admission support
            return None

    def _allocate_blocks_for_token_ids(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        device: Device,
        extra_hash: int | None = None,
    ) -> list[Block]:
        full, tail = self._split_full(token_ids)
        return self._allocate_chunks(prev_block, full, tail, device, extra_hash)

    def _split_full(self, token_ids: list[int]) -> tuple[list[list[int]], list[int]]:
        """Fresh lists: the full block-size chunks, and the partial tail (maybe empty)."""
        size = self._block_size
        end = len(token_ids) - len(token_ids) % size
        return [token_ids[i : i + size] for i in range(0, end, size)], token_ids[end:]

    def _allocate_chunks(
        self,
        prev_block: Block | None,
        full: list[list[int]],
        tail: list[int],
        device: Device,
        extra_hash: int | None,
    ) -> list[Block]:
        """Immutable blocks for the full chunks, then one mutable block for the tail."""
        blocks: list[Block] = []
        if full:
            blocks.extend(
                self._allocator.allocate_immutable_blocks(
                    prev_block, full, device=device, extra_hash=extra_hash
                )
            )
            prev_block = blocks[-1]
        if tail:
            block = self._allocator.allocate_mutable_block(
                prev_block, device=device, extra_hash=extra_hash
            )
            block.append_token_ids(tail)
            blocks.append(block)
        return blocks

    def update(self, blocks: list[Block]) -> None:
        """Replace the blocks (``num_full_slots`` is left as is)."""
        self._blocks.update(blocks)

    # -- appending -------------------------------------------------------------------------

    def append_token_ids(
        self,
        token_ids: list[int],
        num_lookahead_slots: int = 0,
        num_computed_slots: int | None = None,
        extra_hash: int | None = None,
    ) -> None:
        """Write tokens after the last one, growing the table for them plus
        ``num_lookahead_slots``; shared blocks are copied on write and filled blocks
        promoted. With a sliding window, blocks below ``num_computed_slots // block_size
        - window`` are freed and replaced by the null block first. All or nothing."""
        blocks = self._blocks._blocks
        if not blocks:
            raise InvalidArgumentError("the block table has no blocks; allocate it first")
        if token_ids.__class__ is list and _JUST_INT.issuperset(map(type, token_ids)):
            # checked_tokens' own fast path, without the call or its copy: the decode steps
            # below only extend blocks' lists from it; every other path copies it first
            tokens = token_ids
        else:
            tokens = checked_tokens(token_ids)
        if num_lookahead_slots.__class__ is not int or num_lookahead_slots < 0:
            check_count(num_lookahead_slots, "num_lookahead_slots")
        if extra_hash is not None:
            check_extra_hash(extra_hash)
        if self._max_block_sliding_window is None:
            # The decode step, in one frame: the tokens stay within an unshared, uncomputed,
            # partial block of the bundled allocator and the lookahead slots exist already.
            # Nothing to copy, hash, promote or allocate; the block's token total is
            # recomputed (predecessor's total + own tokens), not incremented: a lookahead
            # block made before its predecessor filled stores a stale total until written.
            count = len(tokens)
            num_full = self._num_full_slots
            size = self._block_size
            if count > 0 and count + num_lookahead_slots <= len(blocks) * size - num_full:
                block = blocks[num_full // size]
                if type(block) is PrefixCachingBlock:
                    owner = block._owner
                    written = block._token_ids
                    block_id = block._block_id
                    room = block._block_size - len(written)
                    if (
                        count <= room
                        and count <= size - num_full % size
                        and not block._computed
                        and type(owner) is PrefixCachingBlockAllocator
                        and owner._refcounter._refcounts.get(block_id) == 1  # type: ignore[arg-type]
                        and block._cached_content_hash is None
                    ):
                        written.extend(tokens)
                        prev = block._prev_block  # _update_num_tokens_total, inline
                        if prev is None:
                            block._cached_num_tokens_total = len(written)
                        elif type(prev) is PrefixCachingBlock:
                            block._cached_num_tokens_total = (
                                prev._cached_num_tokens_total + len(written)
                            )
                        else:
                            block._update_num_tokens_total()
                        self._num_full_slots = num_full + count
                        if count == room and block._current_hash() is not None:
                            # it filled: cache it, or move it onto the id cached for it
                            new_id = owner.promote_to_immutable_block(block)
                            if new_id != block_id:
                                self._blocks._block_ids[num_full // size] = new_id
                        return
            if count > 0 and self._append_bundled(tokens, num_lookahead_slots, extra_hash):
                return
            if tokens is token_ids:
                tokens = token_ids.copy()
            if self._append_in_place(tokens, num_lookahead_slots):
                return
        elif tokens is token_ids:
            tokens = token_ids.copy()
        drop_end = self._sliding_window_end(num_computed_slots)
        chunks = self._chunk_token_blocks_for_append(tokens)
        # A third-party allocator without the admission extensions skips the check.
        with contextlib.suppress(NotImplementedError):
            self._check_append_fits(drop_end, chunks, len(tokens) + num_lookahead_slots)

        if self._max_block_sliding_window is not None:
            self._drop_window(drop_end, self._allocator.allocate_or_get_null_block())

        self.ensure_num_empty_slots(len(tokens) + num_lookahead_slots, extra_hash=extra_hash)
        first_block_index = self._num_full_slots // self._block_size
        for offset, chunk in enumerate(chunks):
            self._blocks.append_token_ids(first_block_index + offset, chunk)
        self._num_full_slots += len(tokens)

    def _drop_window(self, end: int, null_block: Block) -> None:
        """Free every block below ``end`` that is not the null block yet and put the null
        block in its place; then cut the first surviving block's link to the freed
        predecessor, so no surviving block links outside the table (``fork`` and ``swap``
        see only the window, and a recycled block object never joins the chain). The
        survivor is full (checked first), so its content hash is fixed before the cut."""
        blocks = self._blocks
        dropped = False
        for index in range(end):
            block = blocks[index]
            if block is not null_block:
                self._allocator.free(block)
                blocks[index] = null_block
                dropped = True
        if dropped:
            _detach_prev(blocks[end])

    def _append_bundled(
        self, tokens: list[int], num_lookahead_slots: int, extra_hash: int | None
    ) -> bool:
        """The decode step of the bundled GPU allocator, done if it applies (else ``False``,
        nothing changed): every block the ``tokens`` (checked, at least one; only read) go into
        that exists already is an unshared, uncomputed, unhashed block of it holding exactly
        the tokens the table counts, the last block is one of its held blocks, and it has an
        id for every block the slots need. The general path's effect, in its order (the new
        blocks taken first from ``allocate_mutable_block``, chained after the last one; then
        each block written, and one that fills promoted), without its admission count, copies
        or re-validation of the tokens: nothing is copied, and no step after the count can
        fail."""
        allocator = self._allocator
        if type(allocator) is not CpuGpuBlockAllocator:
            return False
        gpu = allocator._gpu_allocator
        size = self._block_size
        if type(gpu) is not PrefixCachingBlockAllocator or gpu._block_size != size:
            return False
        block_list = self._blocks
        blocks = block_list._blocks
        ids = block_list._block_ids
        num_full = self._num_full_slots
        count = len(tokens)
        refcounts = gpu._refcounter._refcounts
        first = num_full // size
        written = num_full % size  # the tokens the first block written holds
        targets: list[PrefixCachingBlock] = []  # the blocks written, from index ``first``
        for index in range(first, min((num_full + count - 1) // size + 1, len(blocks))):
            block = blocks[index]
            if (
                type(block) is not PrefixCachingBlock
                or block._owner is not gpu
                or block._computed
                or block._cached_content_hash is not None
                or len(block._token_ids) != written
                or refcounts.get(block._block_id) != 1  # type: ignore[arg-type]
            ):
                return False
            targets.append(block)
            written = 0
        missing = count + num_lookahead_slots - (len(blocks) * size - num_full)
        if missing > 0:
            prev = blocks[-1]
            if (
                type(prev) is not PrefixCachingBlock
                or prev._owner is not gpu
                or not refcounts.get(prev._block_id)  # type: ignore[arg-type]
                or cdiv(missing, size) > gpu.get_num_free_blocks()
            ):
                return False
            for _ in range(cdiv(missing, size)):
                # exactly this allocator class makes exactly PrefixCachingBlocks (_new_block)
                prev = cast(PrefixCachingBlock,
                            gpu.allocate_mutable_block(prev, extra_hash=extra_hash))
                blocks.append(prev)
                ids.append(prev._block_id)  # type: ignore[arg-type]
                targets.append(prev)
        start = 0
        index = first
        for block in targets:
            if start >= count:
                break
            held = block._token_ids
            end = start + size - len(held)
            held.extend(tokens[start:end])
            block._update_num_tokens_total()
            if len(held) == size and block._current_hash() is not None:
                # it filled: cache it, or move it onto the id cached for it
                new_id = gpu.promote_to_immutable_block(block)
                if new_id != ids[index]:
                    ids[index] = new_id
            start = end
            index += 1
        self._num_full_slots = num_full + count
        return True

    def _append_in_place(self, tokens: list[int], num_lookahead_slots: int) -> bool:
        """The common decode step, done if it applies (else ``False``, nothing changed):
        the tokens fit the block they start in and the table already has the lookahead
        slots. Only that block is written, so the step is all or nothing without an
        admission count: copy-on-write takes its fresh id before anything changes."""
        count = len(tokens)
        num_full = self._num_full_slots
        block_size = self._block_size
        block_list = self._blocks
        blocks = block_list.list()
        if count + num_lookahead_slots > len(blocks) * block_size - num_full:
            return False
        if count > block_size - num_full % block_size:
            return False
        if not count:
            return True
        index = num_full // block_size
        block = blocks[index]
        if type(block) is PrefixCachingBlock:
            block_id = block._block_id
            if block_id is None:
                return False  # freed behind the table: the general path names the error
            block._append(tokens)  # tokens are checked already
            if block._block_id != block_id:
                block_list.ids()[index] = block._block_id  # type: ignore[assignment]
        elif block.block_id is None:
            return False
        else:
            block_list.append_token_ids(index, tokens)
        self._num_full_slots = num_full + count
        return True

    def _sliding_window_end(self, num_computed_slots: int | None) -> int:
        window = self._max_block_sliding_window
        if window is None:
            return 0
        if num_computed_slots is None:
            raise InvalidArgumentError("a sliding-window table needs num_computed_slots")
        check_count(num_computed_slots, "num_computed_slots")
        end = num_computed_slots // self._block_size - window
        if end >= len(self._blocks):
            raise InvalidArgumentError(
                "num_computed_slots would move the window past the table's last block"
            )
        if end > 0:
            survivor, last_dropped = self._blocks[end], self._blocks[end - 1]
            if last_dropped is not self._allocator.null_block and not survivor.is_full:
                # Only num_computed_slots beyond the tokens gets here: the first block that
                # stays would still be written, and its hash needs the dropped prefix.
                raise InvalidArgumentError(
                    "num_computed_slots would drop the predecessor of a block not yet full"
                )
        return max(end, 0)

    def _check_append_fits(self, drop_end: int, chunks: list[list[int]], num_slots: int) -> None:
        """Raise :class:`NoFreeBlocksError` unless the GPU can supply every block the
        append takes: the null block (first use), new blocks, and copy-on-write copies,
        counting the ids that dropping window blocks gives back."""
        allocator = self._allocator
        gpu = Device.GPU
        null_block = allocator.null_block
        needs_null = self._max_block_sliding_window is not None and null_block is None

        returned = 0
        dropped = [block for block in self._blocks.list()[:drop_end] if block is not null_block]
        for block_id, handles in self._held_handles(dropped).items():
            if (
                allocator.get_block_device(block_id) is gpu
                and allocator.get_block_refcount(block_id) == handles
            ):
                returned += 1

        new_blocks = max(0, cdiv(num_slots - self._num_empty_slots, self._block_size))
        copies = 0
        first_block_index = self._num_full_slots // self._block_size
        for offset in range(len(chunks)):
            index = first_block_index + offset
            if index >= len(self._blocks):
                break
            target = self._blocks[index]  # never a dropped one (``_sliding_window_end``)
            target_id = target.block_id
            if target_id is None:
                raise DoubleFreeError("a block to write into was freed behind the table")
            refcount = allocator.get_block_refcount(target_id)
            if refcount == 0:
                raise InvalidBlockError(f"a block to write into is stale (id {target_id} is free)")
            if refcount > 1:
                copies += 1

        free = allocator.get_num_free_blocks(gpu)
        if needs_null and free < 1:
            raise NoFreeBlocksError()
        if needs_null + new_blocks + copies > free + returned:
            raise NoFreeBlocksError()

    def ensure_num_empty_slots(self, num_empty_slots: int, extra_hash: int | None = None) -> None:
        """Append empty GPU blocks until at least ``num_empty_slots`` slots are free
        (all or nothing)."""
        if not self._is_allocated:
            raise InvalidArgumentError("the block table has no blocks; allocate it first")
        check_count(num_empty_slots, "num_empty_slots")
        check_extra_hash(extra_hash)
        missing = num_empty_slots - self._num_empty_slots
        if missing <= 0:
            return
        count = cdiv(missing, self._block_size)
        if count > self._allocator.get_num_free_blocks(Device.GPU):
            raise NoFreeBlocksError()
        for _ in range(count):
            self._blocks.append(
                self._allocator.allocate_mutable_block(
                    prev_block=self._blocks[-1], device=Device.GPU, extra_hash=extra_hash
                )
            )

    def _chunk_token_blocks_for_append(self, token_ids: list[int]) -> list[list[int]]:
        """Split tokens so the first piece fills the current block exactly."""
        if not token_ids:
            return []
        first_chunk_size = self._block_size - (self._num_full_slots % self._block_size)
        chunks = [token_ids[:first_chunk_size]]
        chunks.extend(chunk_list(token_ids[first_chunk_size:], self._block_size))
        return chunks

    # -- fork and free -----------------------------------------------------------------------

    def fork(self) -> BlockTable:
        """A new table sharing every block (all refcounts +1, free count unchanged) and
        ``num_full_slots``. A sliding-window table's leading null blocks are shared as the
        null block (never forked or counted); the chain forked is the window's."""
        if not self._is_allocated:
            raise InvalidArgumentError("cannot fork a block table with no blocks")
        blocks = self._blocks.list()
        null_block = self._allocator.null_block
        head: list[Block] = []
        if null_block is not None:
            while blocks[len(head)] is null_block:  # the last block is never the null block
                head.append(null_block)
        forked = self._allocator.fork(blocks[-1])
        if len(forked) != len(blocks) - len(head):
            for block in forked:  # a foreign chain that leaves the table: undo, refuse
                self._allocator.free(block)
            raise ForkError("the block chain does not match the table's blocks")
        # This table's own (checked) settings: no re-validation, no token recount.
        table = BlockTable.__new__(BlockTable)
        table._block_size = self._block_size
        table._allocator = self._allocator
        ids: list[int | None] | None = None
        if (
            not head
            and type(self._allocator) is CpuGpuBlockAllocator
            and type(forked[-1]) in _BUNDLED_BLOCKS  # one device allocator forked them all
        ):
            with contextlib.suppress(AttributeError):
                ids = [block._block_id for block in forked]  # type: ignore[attr-defined]
        if ids is not None and None not in ids:
            # the bundled blocks' ids, read once (BlockList's invariant: none is None)
            block_list = BlockList.__new__(BlockList)
            block_list._blocks = forked
            block_list._block_ids = ids  # type: ignore[assignment]
            table._blocks = block_list
        else:
            table._blocks = BlockList(head + forked if head else forked)
        table._max_block_sliding_window = self._max_block_sliding_window
        table._num_full_slots = self._num_full_slots
        return table

    def free(self) -> None:
        """Free every block and empty the table (``num_full_slots`` is kept).

        All or nothing: a block object held twice is an :class:`InvalidArgumentError`, a
        block already freed behind the table's back a :class:`DoubleFreeError`, both
        raised before any block is freed."""
        blocks = self._blocks.list()
        allocator = self._allocator
        null_block = allocator.null_block
        if (
            null_block is None
            and type(allocator) is CpuGpuBlockAllocator
            and allocator._free_table(blocks)
        ):
            self._blocks.reset()
            return
        real = blocks if null_block is None else [b for b in blocks if b is not null_block]
        if len({id(block) for block in real}) != len(real):
            raise InvalidArgumentError("the table holds the same block object twice")
        # A third-party allocator without refcount queries frees unchecked (upstream).
        with contextlib.suppress(NotImplementedError):
            self._held_handles(real)
        if type(allocator) is CpuGpuBlockAllocator:
            allocator._free_blocks(blocks)
        else:
            for block in blocks:
                allocator.free(block)
        self._blocks.reset()

    def _held_handles(self, blocks: list[Block]) -> Counter[int]:
        """Handles per id of ``blocks`` (the null block excluded by the caller).

        Raises :class:`DoubleFreeError` unless each block still holds an id whose
        refcount covers every handle given, so freeing them one by one cannot fail part
        way for lack of references (ownership is left to the allocator's ``free``)."""
        handles: Counter[int] = Counter(map(_block_id_of, blocks))
        if None in handles:
            raise DoubleFreeError("a block of the table was already freed")
        allocator = self._allocator
        refcount = (
            allocator._refcount_of
            if type(allocator) is CpuGpuBlockAllocator
            else allocator.get_block_refcount
        )
        for block_id, count in handles.items():
            if refcount(block_id) < count:
                raise DoubleFreeError(f"block id {block_id} has fewer references than handles")
        return handles

    # -- queries -------------------------------------------------------------------------------

    @property
    def physical_block_ids(self) -> list[int]:
        """The internal id list itself (empty when not allocated)."""
        return self._blocks.ids()

    def get_unseen_token_ids(self, sequence_token_ids: list[int]) -> list[int]:
        return sequence_token_ids[self._num_full_slots :]

    def get_num_blocks_touched_by_append_slots(
        self, token_ids: list[int], num_lookahead_slots: int
    ) -> int:
        """Worst case: blocks an append of ``token_ids`` plus lookahead touches,
        assuming every touched block needs a new id."""
        num_token_ids = len(token_ids) + num_lookahead_slots
        first_chunk_size = self._block_size - (self._num_full_slots % self._block_size)
        return 1 + cdiv(num_token_ids - first_chunk_size, self._block_size)

    @property
    def blocks(self) -> list[Block]:
        return self._blocks.list()

    @property
    def num_full_slots(self) -> int:
        return self._num_full_slots

    @property
    def _is_allocated(self) -> bool:
        return len(self._blocks) > 0

    @property
    def _num_empty_slots(self) -> int:
        return len(self._blocks) * self._block_size - self._num_full_slots

    def _get_num_token_ids(self) -> int:
        return sum(len(block.token_ids) for block in self._blocks.list())

    def _get_all_token_ids(self) -> list[int]:
        token_ids: list[int] = []
        for block in self._blocks.list():
            token_ids.extend(block.token_ids)
        return token_ids
