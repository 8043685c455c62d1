"""Broken per-device surfaces: one device's own ``swap_in`` (API.md 4.5) called directly, as
a custom swapper does. The device-aware ``swap`` checks the destination first, so only the
device-level calls (``DeviceSwap`` and its misuse variants, ``models.device_calls``) reach
these. Every ``# BUG`` line is the one change from the bundled code.
"""

from __future__ import annotations

from prefixcache._validation import checked_blocks
from prefixcache.errors import BlockFullError, NoFreeBlocksError, SwapError
from prefixcache.interfaces import Block
from prefixcache.naive_block import check_no_duplicate_objects
from tests.zoo.plumbing import PluggableAllocator


class _SwapIn(PluggableAllocator):
    """The bundled ``swap_in`` with its checks switchable (the mutants below turn one off)."""

    check_free: bool = True
    check_held: bool = True

    def swap_in(self, blocks: list[Block]) -> None:
        blocks = checked_blocks(blocks)
        check_no_duplicate_objects(blocks)
        for block in blocks:
            if self.check_held and block.block_id is not None:
                raise SwapError("a block to swap in must not hold an id (swap it out first)")
            if len(block.token_ids) > self._block_size:
                raise BlockFullError("block holds more tokens than this allocator's block size")
        if self.check_free and \
                self.get_num_free_blocks_needed_for_swap_in(blocks) > self.get_num_free_blocks():
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


class SwapInMidwayFailure(_SwapIn):
    """``swap_in`` takes ids block by block without checking the free count first: when the
    device runs out, the blocks before keep their new ids (API.md's upstream behaviour, but
    this allocator claims atomicity)."""

    check_free = False  # BUG: was True


class SwapInTakesHeldBlocks(_SwapIn):
    """``swap_in`` accepts a block that still holds an id: it gets a second id and the first
    one stays referenced by nobody (a leak)."""

    check_held = False  # BUG: was True
