"""Broken managers: vLLM 0.33.0's manager (0.34.0's for a method only it has) with one textual
patch each, and the invariant that must catch it. They show that the request level's checks can
fail (``tests/v1/request``): one per judged behaviour, and one per public method the machine
drives beyond ``get_computed_blocks``, ``allocate_slots``, ``free`` and ``reset_prefix_cache``
(``method`` names it).

Each is also a target spec of its own, ``properties.families.v1.request.zoo:<name>`` (a
function returning the patched :class:`ManagerTarget`), so ``prefixcache check --allocator``
judges it like any manager."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from models.core.invariants import Invariant
from models.families.v1.request_invariants import ManagerInvariants as Family
from properties.families.v1.request.loader import load_manager
from properties.families.v1.request.target import ManagerTarget
from properties.families.v1.upstream import Patch

_MGR = "v1.core.kv_cache_manager"
_STM = "v1.core.single_type_kv_cache_manager"


@dataclass(frozen=True)
class Broken:
    name: str
    what: str
    patches: tuple[Patch, ...]
    families: frozenset[Invariant]
    config: str = "full"
    version: str = "0.33.0"
    #: the public manager method whose contract this variant breaks ("": a core call's)
    method: str = ""

    def target(self) -> ManagerTarget:
        return ManagerTarget(self.name, load_manager(version=self.version,
                                                     patches=self.patches))


ZOO: tuple[Broken, ...] = (
    Broken("hit_takes_last_token", "the hit is capped at num_tokens, not num_tokens - 1",
           ((_MGR, "            max_cache_hit_length = request.num_tokens - 1\n"
                   "        computed_blocks,",
             "            max_cache_hit_length = request.num_tokens\n        computed_blocks,"),),
           frozenset({Family.COMPUTED, Family.CRASH})),
    Broken("none_after_touching_hits", "the free-block check runs after the hits are touched",
           ((_MGR, "        if required_blocks > available_blocks:\n"
                   "            # Cannot allocate new blocks\n            return None\n", ""),
            (_MGR, "        new_blocks = self.coordinator.allocate_new_blocks(",
             "        if required_blocks > available_blocks:\n            return None\n"
             "        new_blocks = self.coordinator.allocate_new_blocks(")),
           frozenset({Family.ATOMIC})),
    Broken("free_keeps_a_block", "free() forgets the request's first block",
           ((_STM, "self.block_pool.free_blocks(reversed(self.pop_blocks_for_free(request_id)))",
             "self.block_pool.free_blocks(list(reversed("
             "self.pop_blocks_for_free(request_id)))[:-1])"),),
           frozenset({Family.RC, Family.LEAK})),
    Broken("salt_not_keyed", "the cache salt is left out of the first block's key",
           (("v1.core.kv_cache_utils", "if (start_token_idx == 0 and request.cache_salt)",
             "if (start_token_idx < 0 and request.cache_salt)"),),
           frozenset({Family.CONTENT})),
    Broken("window_drops_a_block_early", "sliding window frees one block inside the window",
           ((_STM, "num_computed_tokens - self.sliding_window + 1 - self.extra_retained_tokens,",
             "num_computed_tokens - self.sliding_window + 5 - self.extra_retained_tokens,"),),
           frozenset({Family.TABLE, Family.CONTENT, Family.COMPUTED}), config="hybrid"),
    Broken("usage_counts_the_null_block", "usage divides by every block, the null one too",
           ((_MGR, "        return self.block_pool.get_usage()",
             "        return 1.0 - (self.block_pool.get_num_free_blocks()\n"
             "                      / self.block_pool.num_gpu_blocks)"),),
           frozenset({Family.FREE}), method="usage"),
    Broken("stats_not_restarted", "make_prefix_cache_stats keeps counting into the stats it "
           "returned", ((_MGR, "        self.prefix_cache_stats = PrefixCacheStats()\n"
                               "        return stats", "        return stats"),),
           frozenset({Family.HIT}), config="full_stats", method="make_prefix_cache_stats"),
    Broken("stats_ignore_preemption", "a request admitted again after a preemption counts as "
           "a new one", ((_MGR, "preempted=request.num_preemptions > 0",
                          "preempted=False"),),
           frozenset({Family.HIT}), config="full_stats", method="record_prefix_cache_stats"),
    Broken("common_prefix_claims_a_block", "get_num_common_prefix_blocks claims every "
           "group's first block is shared",
           ((_MGR, "return [0] * self.num_kv_cache_groups",
             "return [1] * self.num_kv_cache_groups"),),
           frozenset({Family.CONTENT}), method="get_num_common_prefix_blocks"),
    Broken("computed_ids_one_block_more", "get_block_ids_for_computed_tokens lists one block "
           "past the computed tokens",
           ((_MGR, "num_valid_blocks = cdiv(num_computed_tokens, spec.block_size)",
             "num_valid_blocks = cdiv(num_computed_tokens, spec.block_size) + 1"),),
           frozenset({Family.TABLE}), method="get_block_ids_for_computed_tokens"),
    Broken("evict_keeps_a_block", "evict_blocks leaves the lowest named block keyed",
           ((_MGR, "self.block_pool.evict_blocks(block_ids)",
             "self.block_pool.evict_blocks(set(sorted(block_ids)[1:]))"),),
           frozenset({Family.CACHE}), method="evict_blocks"),
    Broken("cached_tokens_take_last_token", "get_num_cached_tokens lets the hit take the last "
           "token", ((_MGR, "request.block_hashes, request.num_tokens - 1\n        )\n"
                            "        return num_computed_tokens",
                      "request.block_hashes, request.num_tokens\n        )\n"
                      "        return num_computed_tokens"),),
           # hybrid: the derandomized full-attention run reaches a waiting prompt the cache
           # holds whole only past the zoo's 200 examples
           frozenset({Family.HIT}), config="hybrid", version="0.34.0",
           method="get_num_cached_tokens"),
    Broken("estimate_counts_the_table", "estimate_cached_tokens counts every block of the "
           "table, its partly filled last one and lookahead slots too",
           ((_MGR, "                    block.block_hash_num_tokens or 0,\n",
             "                    len(blocks) * group.kv_cache_spec.block_size,\n"),),
           frozenset({Family.HIT, Family.COMPUTED}), method="estimate_cached_tokens"),
    Broken("events_left_queued", "take_events returns the pool's queued events but leaves "
           "them queued (a peek, not a take)",
           ((_MGR, "        events = self.block_pool.take_events()",
             "        events = list(self.block_pool.kv_event_queue)"),),
           frozenset({Family.CACHE}), config="full_stats", method="take_events"),
    Broken("events_drop_the_window", "take_events annotates a sliding-window group's "
           "BlockStored without its window (kv_cache_spec_sliding_window None)",
           ((_MGR, "                get_kv_cache_spec_sliding_window(group.kv_cache_spec),\n",
             "                None,\n"),),
           frozenset({Family.CACHE}), config="hybrid", method="take_events"),
)


def _factory(broken: Broken) -> Callable[[], ManagerTarget]:
    def build() -> ManagerTarget:
        return broken.target()

    build.__name__ = build.__qualname__ = broken.name
    build.__doc__ = f"vLLM {broken.version}'s KVCacheManager, broken: {broken.what}."
    return build


#: ``name -> factory``: the spec ``properties.families.v1.request.zoo:<name>`` of each variant.
FACTORIES: dict[str, Callable[[], ManagerTarget]] = {b.name: _factory(b) for b in ZOO}
globals().update(FACTORIES)


def spec_of(broken: Broken) -> str:
    """The target spec of ``broken``."""
    return f"{__name__}:{broken.name}"
