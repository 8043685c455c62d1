"""Broken managers: vLLM 0.33.0's manager with one textual patch each, and the invariant that
must catch it. They show that the request level's checks can fail (``tests/v1/request``).

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

    def target(self) -> ManagerTarget:
        return ManagerTarget(self.name, load_manager(version="0.33.0", patches=self.patches))


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
)


def _factory(broken: Broken) -> Callable[[], ManagerTarget]:
    def build() -> ManagerTarget:
        return broken.target()

    build.__name__ = build.__qualname__ = broken.name
    build.__doc__ = f"vLLM 0.33.0's KVCacheManager, broken: {broken.what}."
    return build


#: ``name -> factory``: the spec ``properties.families.v1.request.zoo:<name>`` of each variant.
FACTORIES: dict[str, Callable[[], ManagerTarget]] = {b.name: _factory(b) for b in ZOO}
globals().update(FACTORIES)


def spec_of(broken: Broken) -> str:
    """The target spec of ``broken``."""
    return f"{__name__}:{broken.name}"
