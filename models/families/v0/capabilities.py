"""What a target claims, so one model serves naive and prefix-caching allocators of either
upstream generation."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class Generation(enum.Enum):
    """Which upstream API names the target offers (docs/API.md §12)."""

    APHRODITE = "aphrodite"  # get_computed_block_ids, get_num_blocks_touched, no extra_hash
    VLLM = "vllm"  # extra_hash, find_cached_blocks_prefix, reset_prefix_cache, full-touched
    BOTH = "both"  # the bundled allocator


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Declared or detected features of a target.

    ``lru``: eviction claims exact LRU with the upstream tie rule. ``atomic``: failed
    operations leave no trace. ``typed_errors``: misuse raises typed errors (not asserts), so
    the suite may feed it misuse. ``introspection``: the adapter can read the cached and
    evictable id sets, which resolves choices the model cannot observe otherwise.
    ``extra_key_fields``: which request keys of an ``ExtraKey`` the target's extra-key
    function folds in (``"lora"``, ``"salt"``, ``"mm"``, ``"bytes"`` for salts and multimodal
    hashes given as bytes; vLLM 0.8: LoRA only). ``key_builder``: the extra-key function is
    the target's own (``make_extra_hash`` or claimed; vLLM 0.8's is the engine's
    ``Sequence.extra_hash``, which the adapter stands in for), so its argument checks are the
    target's. ``tracker_caching_switch``: the engine's ``ComputedBlocksTracker`` is built with
    ``enable_caching`` (vLLM 0.8, the bundled allocator) and, with caching disabled, ignores
    ``remove_seq`` of a sequence it never held; Aphrodite's tracker has no such switch and
    refuses it (an assert), so there that call is misuse, out of contract without typed errors.
    """

    prefix_caching: bool = True
    lru: bool = True
    swap: bool = True
    extra_keys: bool = True
    generation: Generation = Generation.BOTH
    atomic: bool = True
    typed_errors: bool = True
    introspection: bool = True
    extra_key_fields: frozenset[str] = frozenset({"lora", "salt", "mm", "bytes"})
    key_builder: bool = True
    tracker_caching_switch: bool = True
    #: Upstream deviations the model accepts besides the contract (names of ``TOLERABLE``).
    #: Only an xfails entry's ``tolerate`` sets one, for every program but the entry's own, so
    #: that a deviation nearly every example meets does not end them all (see
    #: ``properties.core.plugin``): the suite still judges everything else, a target without the
    #: deviation still passes, and the entry's replay still fails.
    tolerated: frozenset[str] = frozenset()

    @property
    def aphrodite_api(self) -> bool:
        return self.generation is not Generation.VLLM

    @property
    def vllm_api(self) -> bool:
        return self.generation is not Generation.APHRODITE

    def without(self, *names: str) -> Capabilities:
        """A copy with the named boolean features turned off (``--disable-feature``)."""
        known = {"prefix_caching", "lru", "swap", "extra_keys", "atomic", "typed_errors",
                 "introspection"}
        bad = set(names) - known
        if bad:
            raise ValueError(f"unknown feature(s) {sorted(bad)}; known: {sorted(known)}")
        return replace(self, **dict.fromkeys(names, False))  # type: ignore[arg-type]


#: Tolerable deviations: name -> what the model then accepts as well as the contract.
TOLERABLE: dict[str, str] = {
    "swap_in_queries": "a swap-in counts a cache query per full block (a hit on a cached id, "
                       "else a miss), as upstream's swap_in does through allocate_immutable_block",
}


def tolerating(caps: Capabilities, names: frozenset[str]) -> Capabilities:
    """``caps`` with exactly ``names`` tolerated (each must be in ``TOLERABLE``)."""
    bad = names - TOLERABLE.keys()
    if bad:
        raise ValueError(f"unknown tolerated deviation(s) {sorted(bad)}; known: "
                         f"{sorted(TOLERABLE)}")
    return replace(caps, tolerated=frozenset(names))


@dataclass(frozen=True, slots=True)
class Config:
    """Pool shape of one run: ids ``0..num_gpu_blocks-1`` are GPU, the next ``num_cpu_blocks``
    CPU."""

    block_size: int
    num_gpu_blocks: int
    num_cpu_blocks: int
    caps: Capabilities = Capabilities()
