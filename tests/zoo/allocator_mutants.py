"""Broken single-device prefix-caching allocators.

Each class overrides one method of the bundled ``PrefixCachingBlockAllocator``: a wrapper
around ``super()`` where that suffices, else a copy of the bundled method in which the line
marked ``# BUG`` is the one change (a missing, extra, reordered or altered line).
"""

from __future__ import annotations

from prefixcache._validation import (
    check_device_none,
    check_extra_hash,
    checked_list,
    checked_tokens,
)
from prefixcache.common import CacheMetricData, get_all_blocks_recursively
from prefixcache.errors import NoFreeBlocksError
from prefixcache.evictor import make_evictor
from prefixcache.interfaces import Block, BlockId
from prefixcache.naive_block import forkable_block_id
from prefixcache.prefix_caching_block import _real_block
from prefixcache.utils import Device
from tests.zoo.plumbing import PluggableAllocator

# --------------------------------------------------------------------------- refcounts, release


class CachedPathDuplicateFree(PluggableAllocator):
    """Release picks its path from the *block's* hash instead of the id's cache entry, so a
    block promoted onto a duplicate frees its own (uncached) id into the evictor under a hash
    that maps to the other id."""

    def _release(self, block_id: BlockId, block: Block) -> None:
        tracker = self._block_tracker[block_id]
        if tracker.content_hash is None:
            tracker.content_hash = block.content_hash  # BUG
        super()._release(block_id, block)


class EarlyEvictorBranch(PluggableAllocator):
    """The branch to the evictor / free deque fires when one reference is still left."""

    def _release(self, block_id: BlockId, block: Block) -> None:
        if self._refcounter.decr(block_id) > 1:  # BUG: was `if ...decr(block_id):`
            return
        tracker = self._block_tracker[block_id]
        content_hash = tracker.content_hash
        if content_hash is not None:
            self.evictor.add(block_id, content_hash, block.num_tokens_total, tracker.last_accessed)
            tracker.disable()
        else:
            tracker.disable()
            self._hashless_allocator._free_block_indices.appendleft(block_id)


class PushOnEveryDecrement(PluggableAllocator):
    """A hashless id goes back on the free deque on every decrement, not only at zero."""

    def _release(self, block_id: BlockId, block: Block) -> None:
        remaining = self._refcounter.decr(block_id)
        tracker = self._block_tracker[block_id]
        content_hash = tracker.content_hash
        if content_hash is not None:
            if not remaining:
                self.evictor.add(
                    block_id, content_hash, block.num_tokens_total, tracker.last_accessed
                )
                tracker.disable()
            return
        if not remaining:
            tracker.disable()
        self._hashless_allocator._free_block_indices.appendleft(block_id)  # BUG: unconditional


class HitStaysEvictable(PluggableAllocator):
    """A cache hit on an evictable id revives it without taking it out of the evictor."""

    def _acquire_cached(self, block_id: BlockId) -> None:
        if self._refcounter.incr(block_id) == 1:
            # BUG: `self.evictor.remove(block_id)` is missing
            tracker = self._block_tracker[block_id]
            tracker.enable()
            tracker.computed = True


class HitCountedTwice(PluggableAllocator):
    """Taking a reference to a cached id records a hit too, so every hit counts twice (and a
    promotion onto a duplicate counts as a hit)."""

    def _acquire_cached(self, block_id: BlockId) -> None:
        super()._acquire_cached(block_id)
        self.metric_data.query(hit=True)  # BUG


# --------------------------------------------------------------------------- fresh ids, eviction


class EvictionKeepsContentEntry(PluggableAllocator):
    """Eviction hands the victim out but leaves its hash -> id entry in the content map."""

    def _take_fresh_id(self) -> BlockId:
        free_ids = self._hashless_allocator._free_block_indices
        if free_ids:
            block_id = free_ids.popleft()
            tracker = self._block_tracker[block_id]
        elif self.evictor.num_blocks:
            block_id, _content_hash = self.evictor.evict()
            # BUG: `del self._cached_blocks[content_hash]` is missing
            tracker = self._block_tracker[block_id]
            tracker.content_hash = None
            self._touched_blocks.discard(block_id)
        else:
            raise NoFreeBlocksError()
        self._refcounter.incr(block_id)
        tracker.enable()
        return block_id


class EvictsBeforeHashless(PluggableAllocator):
    """Fresh ids come from the evictor first, discarding cached content while free ids exist."""

    def _take_fresh_id(self) -> BlockId:
        free_ids = self._hashless_allocator._free_block_indices
        if self.evictor.num_blocks:  # BUG: the two branches are swapped
            block_id, content_hash = self.evictor.evict()
            del self._cached_blocks[content_hash]
            tracker = self._block_tracker[block_id]
            tracker.content_hash = None
            self._touched_blocks.discard(block_id)
        elif free_ids:
            block_id = free_ids.popleft()
            tracker = self._block_tracker[block_id]
        else:
            raise NoFreeBlocksError()
        self._refcounter.incr(block_id)
        tracker.enable()
        return block_id


class ReservedIdShared(PluggableAllocator):
    """A block chained after an empty (unwritten) block reuses that block's reserved id, with
    a reference of its own: a table growing by two blocks holds one physical block twice."""

    def allocate_mutable_block(
        self, prev_block: Block | None, device: Device | None = None, extra_hash: int | None = None
    ) -> Block:
        if (
            prev_block is not None
            and not prev_block.token_ids
            and prev_block.block_id is not None
        ):
            check_device_none(device)
            check_extra_hash(extra_hash)
            reserved = prev_block.block_id  # BUG: should take a fresh id
            self._refcounter.incr(reserved)
            return self._new_block(prev_block, [], reserved, extra_hash)
        return super().allocate_mutable_block(prev_block, device, extra_hash)


# --------------------------------------------------------------------------- immutable allocation


class ImmutableBlocksKeepPartial(PluggableAllocator):
    """``allocate_immutable_blocks`` without the up-front capacity check: running out half way
    keeps the blocks already taken."""

    def allocate_immutable_blocks(
        self,
        prev_block: Block | None,
        block_token_ids: list[list[int]],
        device: Device | None = None,
        extra_hash: int | None = None,
    ) -> list[Block]:
        check_device_none(device)
        check_extra_hash(extra_hash)
        self._check_prev(prev_block)
        chunks = [checked_tokens(tokens) for tokens in block_token_ids]
        hashes = self._chain_hashes(prev_block, chunks, extra_hash)
        # BUG: `if self._count_needed(hashes) > self.get_num_free_blocks(): raise` is missing
        blocks: list[Block] = []
        for tokens, content_hash in zip(chunks, hashes, strict=True):
            prev_block = self._allocate_immutable(prev_block, tokens, content_hash, extra_hash)
            blocks.append(prev_block)
        return blocks


class MissCountedOnFailure(PluggableAllocator):
    """A miss is counted before the capacity check, so a failed allocation still counts."""

    def _allocate_immutable(
        self,
        prev_block: Block | None,
        tokens: list[int],
        content_hash: int,
        extra_hash: int | None,
    ) -> Block:
        cached_id = self._cached_blocks.get(content_hash)
        if cached_id is not None:
            self.metric_data.query(hit=True)
            self._acquire_cached(cached_id)
            block = self._new_block(prev_block, tokens, cached_id, extra_hash)
            block.computed = True
        else:
            self.metric_data.query(hit=False)  # BUG: was after the check below
            if not self._hashless_allocator._free_block_indices and not self.evictor.num_blocks:
                raise NoFreeBlocksError()
            block_id = self._take_fresh_id()
            block = self._new_block(prev_block, tokens, block_id, extra_hash)
            self._cache(content_hash, block_id)
        block._cached_content_hash = content_hash
        return block


class ComputedOnPromotion(PluggableAllocator):
    """A newly cached id is marked computed at once, before its KV was written."""

    def _cache(self, content_hash: int, block_id: BlockId) -> None:
        super()._cache(content_hash, block_id)
        self._block_tracker[block_id].computed = True  # BUG


# --------------------------------------------------------------------------- fork


def _chain_by_recursion(block: Block) -> list[Block]:
    """Upstream's ``get_all_blocks_recursively``: one stack frame per block."""
    if block.prev_block is None:
        return [block]
    return [*_chain_by_recursion(block.prev_block), block]


class RecursiveFork(PluggableAllocator):
    """Fork walks the chain recursively: chains over ~1000 blocks raise ``RecursionError``."""

    def fork(self, last_block: Block) -> list[Block]:
        chain = _chain_by_recursion(last_block)  # BUG: was get_all_blocks_recursively
        ids = [forkable_block_id(self, block, self._refcounter._refcounts) for block in chain]
        forked: list[Block] = []
        prev: Block | None = None
        for block, block_id in zip(chain, ids, strict=True):
            self._refcounter.incr(block_id)
            new_block = self._new_block(prev, block.token_ids, block_id, block.extra_hash)
            real = _real_block(block)
            new_block._cached_content_hash = None if real is None else real._cached_content_hash
            forked.append(new_block)
            prev = new_block
        return forked


class ForkOneRefShort(PluggableAllocator):
    """Fork takes no reference for the first block of the chain (an off-by-one)."""

    def fork(self, last_block: Block) -> list[Block]:
        chain = get_all_blocks_recursively(last_block)
        ids = [forkable_block_id(self, block, self._refcounter._refcounts) for block in chain]
        forked: list[Block] = []
        prev: Block | None = None
        for index, (block, block_id) in enumerate(zip(chain, ids, strict=True)):
            if index:  # BUG: the first block of the chain gets no reference
                self._refcounter.incr(block_id)
            new_block = self._new_block(prev, block.token_ids, block_id, block.extra_hash)
            real = _real_block(block)
            new_block._cached_content_hash = None if real is None else real._cached_content_hash
            forked.append(new_block)
            prev = new_block
        return forked


# --------------------------------------------------------------------------- copy-on-write


class CowNotRecorded(PluggableAllocator):
    """Copy-on-write moves the writer to a fresh id but records no (src, dst) pair."""

    def cow_block_if_not_appendable(self, block: Block) -> BlockId:
        src = self._check_held(block)
        if self._refcounter.get(src) <= 1:
            return src
        dst = self._take_fresh_id()
        self._release(src, block)
        # BUG: `self._cow_tracker.record_cow(src, dst)` is missing
        return dst


class CowRecordedReversed(PluggableAllocator):
    """Copy-on-write records the pair as (dst, src)."""

    def cow_block_if_not_appendable(self, block: Block) -> BlockId:
        src = self._check_held(block)
        if self._refcounter.get(src) <= 1:
            return src
        dst = self._take_fresh_id()
        self._release(src, block)
        self._cow_tracker.record_cow(dst, src)  # BUG: was (src, dst)
        return dst


class CowDestinationLeftFree(PluggableAllocator):
    """Copy-on-write takes its destination id by peeking at the free deque: the id gets its
    reference but stays on the deque, so a later allocation hands it to a second owner."""

    def cow_block_if_not_appendable(self, block: Block) -> BlockId:
        src = self._check_held(block)
        if self._refcounter.get(src) <= 1:
            return src
        free_ids = self._hashless_allocator._free_block_indices
        if free_ids:
            dst = free_ids[0]  # BUG: was free_ids.popleft() (inside _take_fresh_id)
            self._refcounter.incr(dst)
            self._block_tracker[dst].enable()
        else:
            dst = self._take_fresh_id()
        self._release(src, block)
        self._cow_tracker.record_cow(src, dst)
        return dst


class CowReleasesFirst(PluggableAllocator):
    """Copy-on-write drops the shared reference before taking the fresh id (upstream's
    order): when no id is free the writer's reference is lost."""

    def cow_block_if_not_appendable(self, block: Block) -> BlockId:
        src = self._check_held(block)
        if self._refcounter.get(src) <= 1:
            return src
        self._release(src, block)  # BUG: was after taking dst
        dst = self._take_fresh_id()
        self._cow_tracker.record_cow(src, dst)
        return dst


# --------------------------------------------------------------------------- counts and queries


class FreeCountOmitsEvictor(PluggableAllocator):
    """The free count leaves out the evictable (cached, unreferenced) ids."""

    def get_num_free_blocks(self, device: Device | None = None) -> int:
        check_device_none(device)
        return len(self._hashless_allocator._free_block_indices)  # BUG: + evictor.num_blocks


class FreeCountDoubleCounts(PluggableAllocator):
    """The free count adds the evictor's ids and, again, the cached ids nobody references."""

    def get_num_free_blocks(self, device: Device | None = None) -> int:
        check_device_none(device)
        unreferenced_cached = sum(
            1 for block_id in self._cached_blocks.values() if not self._refcounter.get(block_id)
        )  # BUG: these are exactly the evictor's ids
        return (
            len(self._hashless_allocator._free_block_indices)
            + self.evictor.num_blocks
            + unreferenced_cached
        )


class TouchedCountsEvictableAsResident(PluggableAllocator):
    """Swap-in estimates treat a full block cached on an *evictable* id as free of charge,
    though reviving it takes a free block: admission is unsound."""

    def _full_block_is_resident(self, block: Block) -> bool:
        content_hash = block.content_hash
        return content_hash is not None and content_hash in self._cached_blocks  # BUG


class BisectedCachedPrefix(PluggableAllocator):
    """``find_cached_blocks_prefix`` by binary search (vLLM's), which assumes the cached and
    computed blocks form a prefix of every chain."""

    def find_cached_blocks_prefix(self, block_hashes: list[int]) -> list[int]:
        block_hashes = checked_list(block_hashes, "block_hashes")

        def usable(content_hash: int) -> bool:
            block_id = self._cached_blocks.get(content_hash)
            return block_id is not None and self.block_is_computed(block_id)

        low, high = 0, len(block_hashes)
        while low < high:  # BUG: was a linear scan to the first unusable hash
            middle = (low + high) // 2
            if usable(block_hashes[middle]):
                low = middle + 1
            else:
                high = middle
        return block_hashes[:low]


class ResetWhileInUse(PluggableAllocator):
    """``reset_prefix_cache`` only refuses while a *cached* id is in use: blocks held as
    mutable ones do not stop it."""

    def reset_prefix_cache(self) -> bool:
        in_use = sum(
            1 for block_id in self._cached_blocks.values() if self._refcounter.get(block_id)
        )  # BUG: was total - free (every id in use)
        if in_use > 0:
            return False
        free_ids = self._hashless_allocator._free_block_indices
        while self.evictor.num_blocks:
            block_id, _ = self.evictor.evict()
            tracker = self._block_tracker[block_id]
            tracker.reset()
            tracker.content_hash = None
            free_ids.appendleft(block_id)
        self._cached_blocks.clear()
        self._touched_blocks.clear()
        self._unwritten.clear()
        self.evictor = make_evictor(self.eviction_policy)
        self.metric_data = CacheMetricData()
        return True
