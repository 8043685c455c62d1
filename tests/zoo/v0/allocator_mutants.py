"""Broken single-device prefix-caching allocators: patches of ``PrefixCachingBlockAllocator``
(``prefixcache/prefix_caching_block.py``). Each is one small, realistic change (a missing,
extra, reordered or altered line), marked ``# BUG`` in the patched source.
"""

from __future__ import annotations

from tests.zoo.patching import Patch


def _alloc(method: str, find: str, replace: str) -> tuple[Patch, ...]:
    return (Patch("prefix_caching_block", f"PrefixCachingBlockAllocator.{method}", find,
                  replace),)


# --------------------------------------------------------------------------- refcounts, release

#: Release picks its path from the *block's* hash instead of the id's cache entry, so a block
#: promoted onto a duplicate frees its own (uncached) id into the evictor under a hash that
#: maps to the other id.
CACHED_PATH_DUPLICATE_FREE = _alloc(
    "_release", "content_hash = tracker.content_hash",
    "if tracker.content_hash is None:\n"
    "    tracker.content_hash = block.content_hash  # BUG\n"
    "content_hash = tracker.content_hash")

#: The branch to the evictor / free deque fires when one reference is still left.
EARLY_EVICTOR_BRANCH = _alloc("_release", "if count:", "if count > 1:  # BUG: was `if count:`")

#: A hashless id goes back on the free deque on every decrement, not only at zero.
PUSH_ON_EVERY_DECREMENT = _alloc(
    "_release", "if count:\n    return",
    "if count:\n"
    "    if self._block_tracker[block_id].content_hash is None:\n"
    "        self._hashless_allocator._free_block_indices.appendleft(block_id)  # BUG\n"
    "    return")

#: A cache hit on an evictable id revives it without taking it out of the evictor.
HIT_STAYS_EVICTABLE = _alloc("_acquire_cached", "self.evictor.remove(block_id)",
                             "pass  # BUG: `self.evictor.remove(block_id)` is missing")

#: Taking a reference to a cached id records a hit too, so every hit counts twice (and a
#: promotion onto a duplicate counts as a hit).
HIT_COUNTED_TWICE = _alloc(
    "_acquire_cached", "if self._refcounter.incr(block_id) == 1:",
    "self.metric_data.query(hit=True)  # BUG\nif self._refcounter.incr(block_id) == 1:")

# --------------------------------------------------------------------------- fresh ids, eviction

#: Eviction hands the victim out but leaves its hash -> id entry in the content map.
EVICTION_KEEPS_CONTENT_ENTRY = _alloc(
    "_take_fresh_id", "del self._cached_blocks[content_hash]",
    "pass  # BUG: `del self._cached_blocks[content_hash]` is missing")

#: Fresh ids come from the evictor first, discarding cached content while free ids exist.
EVICTS_BEFORE_HASHLESS = _alloc(
    "_take_fresh_id", "if free_ids:",
    "if free_ids and not self.evictor.num_blocks:  # BUG: the evictor is tried first")

#: A block chained after an empty (unwritten) block reuses that block's reserved id, with a
#: reference of its own: a table growing by two blocks holds one physical block twice.
RESERVED_ID_SHARED = _alloc(
    "allocate_mutable_block",
    "return self._new_block(prev_block, [], self._take_fresh_id(), extra_hash, owned=True)",
    "if prev_block is not None and not prev_block.token_ids and prev_block.block_id is not None:\n"
    "    self._refcounter.incr(prev_block.block_id)  # BUG: should take a fresh id\n"
    "    return self._new_block(prev_block, [], prev_block.block_id, extra_hash, owned=True)\n"
    "return self._new_block(prev_block, [], self._take_fresh_id(), extra_hash, owned=True)")

# --------------------------------------------------------------------------- immutable allocation

#: ``allocate_immutable_blocks`` without the up-front capacity check: running out half way
#: keeps the blocks already taken.
IMMUTABLE_BLOCKS_KEEP_PARTIAL = _alloc(
    "allocate_immutable_blocks",
    "if self._count_needed(hashes) > self.get_num_free_blocks():\n    raise NoFreeBlocksError()",
    "pass  # BUG: the capacity check is missing")

#: A miss is counted before the capacity check, so a failed allocation still counts.
MISS_COUNTED_ON_FAILURE = _alloc(
    "_allocate_immutable",
    "if not self._hashless_allocator._free_block_indices and not self.evictor.num_blocks:\n"
    "    raise NoFreeBlocksError()\n"
    "self.metric_data.query(hit=False)",
    "self.metric_data.query(hit=False)  # BUG: was after the check below\n"
    "if not self._hashless_allocator._free_block_indices and not self.evictor.num_blocks:\n"
    "    raise NoFreeBlocksError()")

#: A newly cached id is marked computed at once, before its KV was written.
COMPUTED_ON_PROMOTION = _alloc(
    "_cache", "self._touched_blocks.add(block_id)",
    "self._touched_blocks.add(block_id)\nself._block_tracker[block_id].computed = True  # BUG")

# --------------------------------------------------------------------------- fork

#: Fork walks the chain recursively (upstream's ``get_all_blocks_recursively``): chains over
#: ~1000 blocks raise ``RecursionError``.
RECURSIVE_FORK = _alloc(
    "fork", 'chain = get_all_blocks_recursively(check_block(last_block, "last_block"))',
    "def walk(block: Block) -> list[Block]:  # BUG: one stack frame per block\n"
    "    return [block] if block.prev_block is None else [*walk(block.prev_block), block]\n"
    'chain = walk(check_block(last_block, "last_block"))')

#: Fork takes no reference for the first block of the chain (an off-by-one).
FORK_ONE_REF_SHORT = _alloc(
    "fork", "for block, block_id in zip(chain, ids, strict=True):\n    refcounts[block_id] += 1",
    "for index, (block, block_id) in enumerate(zip(chain, ids, strict=True)):\n"
    "    refcounts[block_id] += 1 if index else 0  # BUG: the first block gets no reference")

#: Fork gives each copy the total its own chain computes instead of the original's: a sliding
#: window's first kept block (no predecessor) is forked counting its own tokens only, so the
#: evictor ranks its id by whichever handle is freed last (main's fix c680b6b, undone).
FORK_DROPS_TOTAL = (
    Patch("prefix_caching_block", "PrefixCachingBlockAllocator.fork",
          "new_block._cached_num_tokens_total = block._cached_num_tokens_total",
          "pass  # BUG: the original's token total is not copied"),
    Patch("prefix_caching_block", "PrefixCachingBlockAllocator.fork",
          "new_block._cached_num_tokens_total = real._cached_num_tokens_total",
          "pass  # BUG: the original's token total is not copied"))

# --------------------------------------------------------------------------- copy-on-write

#: Copy-on-write moves the writer to a fresh id but records no (src, dst) pair.
COW_NOT_RECORDED = _alloc("cow_block_if_not_appendable", "self._cow_tracker.record_cow(src, dst)",
                          "pass  # BUG: `self._cow_tracker.record_cow(src, dst)` is missing")

#: Copy-on-write records the pair as (dst, src).
COW_RECORDED_REVERSED = _alloc("cow_block_if_not_appendable",
                               "self._cow_tracker.record_cow(src, dst)",
                               "self._cow_tracker.record_cow(dst, src)  # BUG: was (src, dst)")

#: Copy-on-write takes its destination id by peeking at the free deque: the id gets its
#: reference but stays on the deque, so a later allocation hands it to a second owner.
COW_DESTINATION_LEFT_FREE = _alloc(
    "cow_block_if_not_appendable", "dst = self._take_fresh_id()",
    "free_ids = self._hashless_allocator._free_block_indices\n"
    "if free_ids:\n"
    "    dst = free_ids[0]  # BUG: was free_ids.popleft() (inside _take_fresh_id)\n"
    "    self._refcounter.incr(dst)\n"
    "    self._block_tracker[dst].enable()\n"
    "else:\n"
    "    dst = self._take_fresh_id()")

#: Copy-on-write drops the shared reference before taking the fresh id (upstream's order):
#: when no id is free the writer's reference is lost.
COW_RELEASES_FIRST = _alloc(
    "cow_block_if_not_appendable", "dst = self._take_fresh_id()\nself._release(src, block)",
    "self._release(src, block)  # BUG: was after taking dst\ndst = self._take_fresh_id()")

# --------------------------------------------------------------------------- counts and queries

_FREE_COUNT = "return len(self._hashless_allocator._free_block_indices) + self.evictor.num_blocks"

#: The free count leaves out the evictable (cached, unreferenced) ids.
FREE_COUNT_OMITS_EVICTOR = _alloc(
    "get_num_free_blocks", _FREE_COUNT,
    "return len(self._hashless_allocator._free_block_indices)  # BUG: + evictor.num_blocks")

#: The free count adds the evictor's ids and, again, the cached ids nobody references.
FREE_COUNT_DOUBLE_COUNTS = _alloc(
    "get_num_free_blocks", _FREE_COUNT,
    _FREE_COUNT + " + sum(\n"
    "    1 for i in self._cached_blocks.values() if not self._refcounter.get(i)\n"
    ")  # BUG: these are exactly the evictor's ids")

#: Swap-in estimates treat a full block cached on an *evictable* id as free of charge, though
#: reviving it takes a free block: admission is unsound.
TOUCHED_COUNTS_EVICTABLE_AS_RESIDENT = _alloc(
    "_full_block_is_resident", "self._is_active_cached(content_hash)",
    "content_hash in self._cached_blocks  # BUG: active or not")

#: ``find_cached_blocks_prefix`` by binary search (vLLM's), which assumes the cached and
#: computed blocks form a prefix of every chain.
BISECTED_CACHED_PREFIX = _alloc(
    "find_cached_blocks_prefix",
    "length = 0\nfor content_hash in block_hashes:",
    "def usable(content_hash: int) -> bool:\n"
    "    block_id = self._cached_blocks.get(content_hash)\n"
    "    return block_id is not None and self.block_is_computed(block_id)\n"
    "low, high = 0, len(block_hashes)\n"
    "while low < high:  # BUG: was a linear scan to the first unusable hash\n"
    "    middle = (low + high) // 2\n"
    "    if usable(block_hashes[middle]):\n"
    "        low = middle + 1\n"
    "    else:\n"
    "        high = middle\n"
    "return block_hashes[:low]\n"
    "length = 0\nfor content_hash in block_hashes:")

#: ``reset_prefix_cache`` only refuses while a *cached* id is in use: blocks held as mutable
#: ones do not stop it.
RESET_WHILE_IN_USE = _alloc(
    "reset_prefix_cache", "in_use = self.get_num_total_blocks() - self.get_num_free_blocks()",
    "in_use = sum(1 for i in self._cached_blocks.values() if self._refcounter.get(i))"
    "  # BUG: was total - free (every id in use)")
