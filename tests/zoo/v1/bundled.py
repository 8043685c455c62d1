"""Broken bundled v1 pools: one small textual patch of ``prefixcache/v1/core/`` each, and the
family the v1 block-level machine must catch it with.

The baseline is the bundled pool (:func:`tests.zoo.v1.bundled_copy.bundled_pool`), so no vLLM
wheel is needed. Events are checked through their replay, which reports ``CACHE`` (the replayed
key set is the cache map: :mod:`models.families.v1.events`). Bug classes from vLLM's tracker are
marked ``(tracker)``: cross-LoRA reuse, a block handed out twice, the null block cached, failed
allocations with side effects, events disagreeing with the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from models.core.invariants import Invariant
from models.families.v1.invariants import Family
from properties.families.v1.targets import PoolTarget
from tests.zoo.patching import Patch

BP, KU = "v1.core.block_pool", "v1.core.kv_cache_utils"


@dataclass(frozen=True)
class Variant:
    name: str
    family: Invariant
    bug: str
    patches: tuple[Patch, ...]
    examples: int = 300  # the search budget (derandomized, 50 steps each)
    #: Families a differently shaped program (the fuzzer's) may break first for the same bug.
    also: tuple[Invariant, ...] = ()
    #: The zoo machine's ``num_hash_lookahead_tokens`` (``PoolConfig.lookahead``): a bug that
    #: only hash lookahead shows is searched for with it on.
    lookahead: int = 0
    #: The zoo machine's ``enable_caching`` (``PoolConfig.caching``): a bug that only a pool
    #: with caching off shows is searched for with it off.
    caching: bool = True


def _v(name: str, family: Invariant, bug: str, module: str, scope: str, find: str, replace: str,
       examples: int = 300) -> Variant:
    return Variant(name, family, bug, (Patch(module, scope, find, replace),), examples)


F = Family
VARIANTS: tuple[Variant, ...] = (
    # --- reference counts and what a handed-out block looks like
    _v("free_drops_two_refs", F.RC, "free_blocks drops two references of a shared block",
       BP, "BlockPool.free_blocks", "block.ref_cnt = ref - 1",
       "block.ref_cnt = ref - 1 - (ref > 1)  # BUG"),
    _v("touch_skips_shared", F.RC, "touch adds no reference to a block already in use",
       BP, "BlockPool.touch", "block.ref_cnt = ref + 1",
       "block.ref_cnt = ref + (ref == 0)  # BUG: was ref + 1"),
    _v("reuse_keeps_old_key", F.RC, "a reused block keeps its old key (stale hit)",
       BP, "BlockPool.get_new_blocks",
       "if block._block_hash is not None or (aliases and block.block_id in aliases):",
       "if False:  # BUG: keys of the reused block are kept"),
    # --- free-queue membership, counts
    _v("touch_leaves_block_queued", F.LEAK, "a hit on a free block leaves it in the queue",
       BP, "BlockPool._touch_rest", "if block.ref_cnt == 0:\n    queued.append(block)",
       "if False:  # BUG: the block stays queued\n    queued.append(block)"),
    replace(_v("keyless_queued_twice", F.FREE,
       "(tracker) a keyless freed block is queued at both ends, so it is handed out twice",
       BP, "BlockPool.free_blocks", "to_head.append(block)",
       "to_head.append(block)\nblock.prev_free_block = last  # BUG: queued at both ends\n"
       "last.next_free_block = block\nlast = block\nlinked += 1"),
       also=(F.LEAK,)),
    Variant("free_count_off_by_one", F.FREE, "popping three or more blocks miscounts the queue", (
        Patch(KU, "FreeKVCacheBlockQueue.popleft_n", "self.num_free_blocks -= n",
              "self.num_free_blocks -= n - (n > 2)  # BUG"),
        Patch(BP, "BlockPool.get_new_blocks", "queue.num_free_blocks -= num_blocks",
              "queue.num_free_blocks -= num_blocks - (num_blocks > 2)  # BUG"))),
    _v("usage_counts_null_block", F.FREE, "get_usage counts the null block as capacity",
       BP, "BlockPool.get_usage", "total = self.num_gpu_blocks - 1",
       "total = self.num_gpu_blocks  # BUG"),
    _v("over_allocation_not_refused", F.FREE,
       "get_new_blocks hands out fewer blocks instead of refusing",
       BP, "BlockPool.get_new_blocks",
       "raise NoFreeBlocksError(f\"Cannot get {num_blocks} free blocks from the pool\")",
       "num_blocks = self.free_block_queue.num_free_blocks  # BUG: was a NoFreeBlocksError"),
    # --- eviction order (LRU, ties to the chain tail)
    _v("unhashed_freed_to_tail", F.LRU, "keyless freed blocks go to the tail, not the head",
       BP, "BlockPool.free_blocks",
       "if to_head:  # ``FreeKVCacheBlockQueue._prepend_unchecked``, inlined",
       "if to_head:\n    queue._append_unchecked(to_head)  # BUG: at the tail\nif False:"),
    replace(_v("caching_off_frees_to_tail", F.LRU,
       "with caching off, freed blocks are queued at the tail (as if a key promised their "
       "contents) instead of the head",
       BP, "BlockPool.free_blocks", "if block._block_hash is None or not caching:",
       "if (block._block_hash is None or not caching) and self.enable_caching:  # BUG"),
       caching=False),
    _v("tie_order_reversed", F.LRU,
       "blocks freed together are queued in reverse (the chain head is evicted first)",
       BP, "BlockPool.free_blocks",
       "if linked:\n    last.next_free_block = tail",
       "if linked:  # BUG: the chain is queued in reverse\n"
       "    chain = []\n"
       "    chained = last_queued.next_free_block\n"
       "    while chained is not None:\n"
       "        chain.append(chained)\n"
       "        chained = chained.next_free_block\n"
       "    last = last_queued\n"
       "    for chained in reversed(chain):\n"
       "        chained.prev_free_block = last\n"
       "        last.next_free_block = chained\n"
       "        last = chained\n"
       "    last.next_free_block = tail"),
    _v("keyless_order_reversed", F.LRU,
       "keyless blocks freed together are queued in reverse order",
       BP, "BlockPool.free_blocks", "for block in to_head:",
       "for block in to_head[::-1]:  # BUG"),
    # --- the cache map
    _v("lookup_first_group_only", F.CACHE, "a lookup over several groups checks only the first",
       BP, "BlockPool.get_cached_block", "for group_id in kv_cache_group_ids:",
       "for group_id in kv_cache_group_ids[:1]:  # BUG"),
    _v("duplicate_pop_takes_any", F.CACHE,
       "removing one block of a duplicated key removes another one",
       BP, "BlockHashToBlockMap.pop", "block = blocks.pop(block_id, None)",
       "block = blocks.popitem()[1]  # BUG"),
    _v("reset_while_in_use", F.CACHE, "reset_prefix_cache succeeds with blocks in use",
       BP, "BlockPool.reset_prefix_cache", "if num_used != 1:",
       "if num_used < 1:  # BUG: was != 1"),
    _v("block_mask_ignored", F.CACHE, "cache_full_blocks keys the blocks its mask skips",
       BP, "BlockPool.cache_full_blocks",
       "if block.is_null or (block_mask is not None and not block_mask[offset]):",
       "if block.is_null:  # BUG: the mask is ignored"),
    Variant("null_block_cached", F.CACHE, "(tracker) cache_full_blocks keys the null block", (
        Patch(BP, "BlockPool.cache_full_blocks",
              "if block.is_null or (block_mask is not None and not block_mask[offset]):\n"
              "    continue\nblock_id = block.block_id\nif block.ref_cnt <= 0:",
              "if block_mask is not None and not block_mask[offset]:  # BUG: nulls not skipped\n"
              "    continue\nblock_id = block.block_id\n"
              "if block.ref_cnt <= 0 and not block.is_null:"),
        Patch(BP, "BlockPool.cache_full_blocks", "if block_id in seen:",
              "if block_id in seen and not block.is_null:"))),
    _v("eviction_keeps_aliases", F.CACHE, "a reused block's alias keys still reach it",
       BP, "BlockPool._remove_cached_block_hashes",
       "keys = self._block_keys(block)",
       "keys = [] if block._block_hash is None else [block._block_hash]  # BUG: no aliases",
       examples=1000),
    # --- keys: different inputs never share a block
    _v("key_ignores_lora", F.HASH, "(tracker) requests of different LoRA adapters share KV",
       KU, "_gen_lora_extra_hash_keys",
       'return [("lora", lora.lora_name, lora.lora_path, lora.lora_int_id)]',
       "return []  # BUG"),
    _v("key_ignores_salt", F.HASH, "the cache salt is left out of the first block's key",
       KU, "generate_block_hash_extra_keys",
       'if start_token_idx == 0 and salt else []', "if start_token_idx < 0 else []  # BUG"),
    _v("key_ignores_prompt_embeds", F.HASH, "prompt embeddings are left out of the key",
       KU, "_gen_prompt_embeds_extra_hash_keys",
       "if request.prompt_embeds is None:", "if True:  # BUG"),
    _v("key_drops_mm_offset", F.HASH, "a multimodal key omits the item's offset in the block",
       KU, "_gen_mm_extra_hash_keys",
       'extra_keys.append(("mm", feature.identifier, offset - start_token_idx))',
       'extra_keys.append(("mm", feature.identifier))  # BUG', examples=3000),
    replace(_v("key_ignores_lookahead", F.HASH,
       "with hash lookahead, a block's key leaves out the lookahead tokens: requests that "
       "differ only after the block share the drafter's KV",
       KU, "get_request_block_hasher", "extra = (keys, *tokens[end : end + lookahead])",
       "extra = keys  # BUG: the lookahead tokens are left out"), lookahead=2),
    _v("key_ignores_last_token", F.HASH, "a block's key leaves out its last token",
       KU, "get_request_block_hasher",
       "parent = hash_block_tokens(caching_hash_fn, parent, tokens[start:end], extra)",
       "parent = hash_block_tokens(caching_hash_fn, parent, tokens[start : end - 1],  # BUG\n"
       "                           extra)"),
    _v("key_ignores_mm_identifier", F.HASH,
       "a multimodal key omits the item's identifier: another image at the same place shares KV",
       KU, "_gen_mm_extra_hash_keys",
       'extra_keys.append(("mm", feature.identifier, offset - start_token_idx))',
       'extra_keys.append(("mm", offset - start_token_idx))  # BUG: no identifier'),
    # --- keys: equal inputs share a block (a key covering more than the KV misses hits)
    _v("key_covers_next_token", F.HIT,
       "a block's key also covers the token after it: equal prefixes that go on differently "
       "never share",
       KU, "get_request_block_hasher",
       "extra, mm_idx = generate_block_hash_extra_keys(request, start, end, mm_idx)",
       "extra, mm_idx = generate_block_hash_extra_keys(request, start, end, mm_idx)\n"
       "extra = (extra, *tokens[end : end + 1])  # BUG: the next token too"),
    _v("key_covers_later_mm", F.HIT,
       "a block's key names a multimodal item that starts after the block",
       KU, "_gen_mm_extra_hash_keys", "if end_token_idx <= offset:\n    break",
       "if end_token_idx <= offset:\n"
       "    extra_keys.append((\"mm\", feature.identifier))  # BUG: an item after the block\n"
       "    break"),
    _v("chain_ignores_parent", F.HASH, "a block's hash ignores its prefix (no chaining)",
       KU, "hash_block_tokens", "if not parent_block_hash:", "if True:  # BUG"),
    _v("key_ignores_group", F.CACHE, "keys of different groups collide",
       KU, "make_block_hash_with_group_id",
       "return BlockHashWithGroupId(block_hash + GROUP_SUFFIXES[group_id])",
       "return BlockHashWithGroupId(block_hash + GROUP_SUFFIXES[0])  # BUG"),
    # --- events: replaying them must reproduce the cache map
    _v("removal_events_dropped", F.CACHE, "(tracker) BlockRemoved is never emitted",
       BP, "BlockPool._emit_block_removed_events",
       "if not self.enable_kv_cache_events:", "if True:  # BUG"),
    _v("removal_per_copy", F.CACHE,
       "(tracker) BlockRemoved for a key other blocks still hold",
       BP, "BlockPool._remove_cached_block_hashes", "if key not in cache._cache:",
       "if True:  # BUG: was only when no block holds the key", examples=1000),
    replace(_v("stored_event_lookahead_shifted", F.CACHE,
       "with hash lookahead, BlockStored reports the tokens one past the ones the key covers",
       BP, "BlockPool.get_lookahead_token_ids",
       "return list(request.all_token_ids[block_end : block_end + self.num_hash_lookahead_tokens])",
       "return list(request.all_token_ids[block_end + 1 : block_end + 1  # BUG: one past\n"
       "                                  + self.num_hash_lookahead_tokens])"), lookahead=2),
    _v("reset_not_announced", F.CACHE, "reset_prefix_cache emits no AllBlocksCleared",
       BP, "BlockPool.reset_prefix_cache",
       "self.kv_event_queue.append(self.kv_event_classes.AllBlocksCleared())",
       "pass  # BUG"),
    _v("stored_event_skips_first", F.CACHE, "BlockStored leaves out a run's first block",
       BP, "BlockPool._stored_event", "for i in range(first, stop):",
       "for i in range(first + (stop - first > 1), stop):  # BUG"),
    # --- failure atomicity and misuse
    _v("failed_allocation_evicts", F.ATOMIC,
       "(tracker) a refused get_new_blocks has already dropped the head blocks' keys",
       BP, "BlockPool.get_new_blocks",
       "raise NoFreeBlocksError(f\"Cannot get {num_blocks} free blocks from the pool\")",
       "for block in self.free_block_queue.get_all_free_blocks():  # BUG: before refusing\n"
       "    self._maybe_evict_cached_block(block)\n"
       "raise NoFreeBlocksError(\"Cannot get free blocks\")"),
    _v("cache_validates_late", F.ATOMIC,
       "(tracker) cache_full_blocks keys what it can before finding the hashes too short",
       BP, "BlockPool.cache_full_blocks",
       "if len(block_hashes) < num_full_blocks:",
       "if len(block_hashes) < num_full_blocks:\n"
       "    for i in range(num_cached_blocks, len(block_hashes)):  # BUG: before raising\n"
       "        key = make_block_hash_with_group_id(block_hashes[i], kv_cache_group_id)\n"
       "        self._insert_block_hash(key, blocks[i], (i + 1) * block_size)"),
    _v("double_free_unchecked", F.CRASH,
       "a block freed more often than held goes negative silently",
       BP, "BlockPool.free_blocks",
       "if ref < 1:  # not held: refused below\n    break",
       "if ref < 1:  # BUG: no double-free check\n    block.ref_cnt = ref - 1\n    continue"),
    _v("evict_ids_unchecked", F.CRASH, "evict_blocks indexes blocks with unchecked ids",
       BP, "BlockPool.evict_blocks",
       "if type(block_id) is not int or not 0 <= block_id < self.num_gpu_blocks:",
       "if type(block_id) is not int:  # BUG: no range check"),
    # --- the API engines drive around transfers and copies (0.33/0.34)
    _v("unpin_forgets_reader", F.CONTENT,
       "unpin_blocks registers no on_reuse: the reader keeps reading a reused block",
       BP, "BlockPool.unpin_blocks", "self._reuse_watchers[block.block_id] = on_reuse",
       "pass  # BUG: no watcher"),
    _v("unpin_to_head", F.LRU, "unpinned blocks join the queue head (evicted first)",
       BP, "BlockPool.unpin_blocks", "self.free_block_queue.append_n(released)",
       "self.free_block_queue.prepend_n(released)  # BUG: was the tail"),
    _v("partial_replace_ignored", F.CACHE,
       "cache_partial_block(replace_existing_hashes=True) keeps the keys of the block's old "
       "contents (a deeper key stays primary, a shallower one an alias)",
       BP, "BlockPool.cache_partial_block", "replace = replace_existing_hashes or (",
       "replace = (  # BUG: replace_existing_hashes ignored", examples=1000),
    _v("move_keeps_source_key", F.CACHE,
       "move_block_hashes leaves the source keyed (its request overwrites a cached block)",
       BP, "BlockPool.move_block_hashes", "src_block.reset_hash()", "pass  # BUG"),
    _v("emit_cached_announces_miss", F.CACHE,
       "emit_cached_block_events also announces the block after the hits (a miss)",
       BP, "BlockPool.emit_cached_block_events",
       "self._stored_event(request, block_hashes, 0, present, block_size, kv_cache_group_id)",
       "self._stored_event(request, block_hashes, 0, min(present + 1, len(block_hashes)),\n"
       "                   block_size, kv_cache_group_id)  # BUG: one past the hits",
       examples=1500),
    _v("writable_when_shared", F.CACHE,
       "is_block_writable ignores other holders: a shared block is offered for writing",
       BP, "BlockPool.is_block_writable",
       "return not block.is_null and block.ref_cnt == 1 and block.block_hash is None",
       "return not block.is_null and block.block_hash is None  # BUG: holders ignored"),
    _v("evict_first_ignored", F.LRU, "free_blocks(evict_first=True) queues keyed blocks last",
       BP, "BlockPool.free_blocks", "caching = self.enable_caching and not evict_first",
       "caching = self.enable_caching  # BUG: evict_first ignored"),
    Variant("touch_accepts_foreign", F.CRASH,
            "touch counts another pool's block and unlinks it from its owner's queue", (
        Patch(BP, "BlockPool.touch",
              "if block._owner is not owner:\n    if block is self.null_block:",
              "if block.is_null:  # BUG: any pool's block\n    if block is self.null_block:"),
        Patch(BP, "BlockPool._touch_rest",
              "if members[block.block_id] is not block:\n    if block is null:",
              "if block.is_null:  # BUG: any pool's block\n    if block is null:"))),
    # --- the null block
    Variant("touch_counts_null_block", F.CRASH, "touch of a window's null block unlinks it", (
        Patch(BP, "BlockPool.touch", "if block is self.null_block:\n    continue\nbreak",
              "if block is not self.null_block:  # BUG: the null block is not skipped\n    break"),
        Patch(BP, "BlockPool._touch_rest", "if block is null:\n    continue\nbreak",
              "if block is not null:  # BUG: the null block is not skipped\n    break"))),
)

BY_NAME = {v.name: v for v in VARIANTS}


def __getattr__(name: str) -> Callable[[], PoolTarget]:
    """``tests.zoo.v1.bundled:<variant>``: a factory of that variant's pool (the spec
    ``python -m fuzz --family v1 zoo`` loads)."""
    variant = BY_NAME.get(name)
    if variant is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def make() -> PoolTarget:
        from tests.zoo.v1.bundled_copy import patched_bundled_pool

        return patched_bundled_pool(variant.name, variant.patches)

    make.__name__ = make.__qualname__ = name
    return make
