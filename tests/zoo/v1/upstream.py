"""Broken vLLM 0.33.0 pools: one textual patch of the wheel's source each, and the family
the v1 machine must catch it with (until the bundled v1 pool is the zoo's baseline)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from models.core.invariants import Invariant
from models.families.v1.invariants import Family

BP, KU = "v1.core.block_pool", "v1.core.kv_cache_utils"


@dataclass(frozen=True)
class Variant:
    name: str
    family: Invariant
    patches: tuple[tuple[str, str, str], ...]
    avoid: frozenset[str] = frozenset({"window_nulls", "partial_blocks", "evict_held",
                                       "duplicates"})
    events: bool = True  # off where a known upstream event deviation would be reached first
    examples: int = 600  # the search budget (derandomized, 50 steps each)


def _v(name: str, family: Invariant, module: str, old: str, new: str,
       avoid: frozenset[str] | None = None, events: bool = True) -> Variant:
    if avoid is None:
        return Variant(name, family, ((module, old, new),), events=events)
    return Variant(name, family, ((module, old, new),), avoid, events)


VARIANTS: tuple[Variant, ...] = (
    _v("unhashed_freed_to_tail", Family.LRU, BP,
       "self.free_block_queue.prepend_n(blocks_to_evict_first)",
       "self.free_block_queue.append_n(blocks_to_evict_first)"),
    _v("touch_leaves_block_queued", Family.LEAK, BP,
       "self.free_block_queue.remove(block)", "pass"),
    _v("reuse_keeps_old_key", Family.RC, BP,
       "self._maybe_evict_cached_block(block)\n                assert",
       "assert"),
    _v("free_drops_two_refs", Family.RC, BP,
       "block.ref_cnt -= 1\n            if block.ref_cnt == 0:",
       "block.ref_cnt -= 1 + (block.ref_cnt > 1)\n            if block.ref_cnt == 0:"),
    _v("lookup_first_group_only", Family.CACHE, BP,
       "for group_id in kv_cache_group_ids:", "for group_id in kv_cache_group_ids[:1]:"),
    _v("key_ignores_group", Family.CACHE, KU,
       'group_id.to_bytes(4, "big", signed=False)', '(0).to_bytes(4, "big", signed=False)'),
    _v("key_ignores_lora", Family.HASH, KU,
       'return [("lora", lora_request.lora_name, lora_request.lora_path)]', "return []"),
    _v("key_ignores_salt", Family.HASH, KU,
       "if (start_token_idx == 0 and request.cache_salt)", "if (start_token_idx < 0)"),
    _v("key_ignores_prompt_embeds", Family.HASH, KU,
       "if request.prompt_embeds is None:", "if True:"),
    _v("key_drops_mm_offset", Family.HASH, KU,
       'extra_keys.append(("mm", mm_feature.identifier, offset - start_token_idx))',
       'extra_keys.append(("mm", mm_feature.identifier))'),
    _v("reset_while_in_use", Family.CACHE, BP,
       "if num_used_blocks != 1:", "if num_used_blocks < 1:"),
    # A block with alias keys, evicted and reused, takes more examples to reach.
    replace(_v("eviction_keeps_aliases", Family.CACHE, BP,
       "block_hashes.extend(self.cached_block_hashes_by_block.pop(block.block_id, ()))",
       "self.cached_block_hashes_by_block.get(block.block_id, ())",
       frozenset({"window_nulls"}), events=False), examples=3000),
    _v("usage_counts_null_block", Family.FREE, BP,
       "total_gpu_blocks = self.num_gpu_blocks - 1", "total_gpu_blocks = self.num_gpu_blocks"),
    _v("duplicate_pop_takes_any", Family.CACHE, BP,
       "block = blocks.pop(block_id, None)", "block = blocks.popitem()[1]",
       frozenset({"window_nulls", "partial_blocks", "evict_held"}), events=False),
    _v("promotion_keeps_partial_key", Family.CACHE, BP,
       "removed_hashes = self._remove_cached_block_hashes(blk)", "removed_hashes = []",
       frozenset({"window_nulls", "evict_held", "duplicates"}), events=False),
    _v("touch_counts_null_block", Family.CRASH, BP,
       "if block.is_null:\n                continue", "pass",
       frozenset({"partial_blocks"}), events=False),
    _v("block_mask_ignored", Family.CACHE, BP,
       "if blk.is_null or (block_mask is not None and not block_mask[i]):",
       "if blk.is_null:", frozenset({"partial_blocks", "evict_held"}), events=False),
    _v("free_count_off_by_one", Family.FREE, KU,
       "self.num_free_blocks -= n\n", "self.num_free_blocks -= n - (n > 2)\n"),
    _v("removal_events_dropped", Family.CACHE, BP,
       "        if not self.enable_kv_cache_events:\n            return\n        for block_hash",
       "        if True:\n            return\n        for block_hash"),
)
