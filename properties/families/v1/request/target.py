"""The request-level target: a ``KVCacheManager`` built from real spec classes, and its hasher.

A :class:`ManagerConfig` names the KV cache groups the way a model's layers would produce
them: ``("full", block_size)`` for full attention, ``("window", block_size, window)`` for
sliding window. Several groups make the hybrid coordinator.
"""

from __future__ import annotations

import math
import threading
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from properties.core.targets import TargetError, resolve
from properties.families.v1.request.loader import ManagerModules, load_manager
from properties.families.v1.targets import DEFAULT_SPEC as DEFAULT_POOL_SPEC

_SWAP = threading.Lock()

Group = tuple[Any, ...]  # ("full", block_size) or ("window", block_size, sliding_window)


@dataclass(frozen=True)
class ManagerConfig:
    num_blocks: int
    groups: tuple[Group, ...]
    hash_block_size: int
    max_model_len: int = 64
    events: bool = False
    #: the manager's ``log_stats``: it aggregates prefix cache stats, which the executor
    #: records at each admission and takes at each step's end, as the scheduler does
    log_stats: bool = False

    @property
    def block_sizes(self) -> tuple[int, ...]:
        return tuple(int(g[1]) for g in self.groups)

    def window(self, group: int) -> int | None:
        g = self.groups[group]
        return int(g[2]) if g[0] == "window" else None

    def to_json(self) -> dict[str, Any]:
        return {"num_blocks": self.num_blocks, "groups": [list(g) for g in self.groups],
                "hash_block_size": self.hash_block_size, "max_model_len": self.max_model_len,
                "events": self.events, **({"log_stats": True} if self.log_stats else {})}

    @staticmethod
    def from_json(data: dict[str, Any]) -> ManagerConfig:
        return ManagerConfig(num_blocks=data["num_blocks"],
                             groups=tuple(tuple(g) for g in data["groups"]),
                             hash_block_size=data["hash_block_size"],
                             max_model_len=data.get("max_model_len", 64),
                             events=data.get("events", False),
                             log_stats=data.get("log_stats", False))


FULL = ManagerConfig(num_blocks=10, groups=(("full", 4),), hash_block_size=4)
# Full attention beside a sliding window, with the KV events it publishes (taken once per step):
# each BlockStored names its group's spec kind and window, and window tables hold null blocks.
HYBRID = ManagerConfig(num_blocks=18, groups=(("full", 4), ("window", 4, 6)), hash_block_size=4,
                       events=True)
WINDOW = ManagerConfig(num_blocks=10, groups=(("window", 4, 5),), hash_block_size=4)
# Groups of different block sizes: hits must align to both (scheduler block size 8).
HYBRID_MIXED = ManagerConfig(num_blocks=20, groups=(("full", 4), ("window", 8, 10)),
                             hash_block_size=4)
# Full attention with the stats an engine logs (prefix cache stats, usage) and the KV events it
# publishes (taken once per step, replayed into a router's view): honest metrics and routes.
FULL_STATS = ManagerConfig(num_blocks=10, groups=(("full", 4),), hash_block_size=4,
                           events=True, log_stats=True)
CONFIGS = {"full": FULL, "hybrid": HYBRID, "window": WINDOW, "hybrid_mixed": HYBRID_MIXED,
           "full_stats": FULL_STATS}


@dataclass(frozen=True)
class ManagerTarget:
    """A release's ``KVCacheManager``; ``pool_cls``, when set, is the ``BlockPool`` class its
    coordinator builds instead of the release's own (the manager's code is unchanged);
    ``manager_cls``, when set, the class built instead of the release's ``KVCacheManager`` (a
    subclass: the API coverage's counting one)."""

    name: str
    mods: ManagerModules
    pool_cls: Any = None
    manager_cls: Any = None

    @property
    def manager_class(self) -> Any:
        """The ``KVCacheManager`` class :meth:`create` builds."""
        return self.manager_cls or self.mods.kv_cache_manager.KVCacheManager

    @property
    def version(self) -> str:
        return self.mods.version

    def _spec(self, group: Group) -> Any:
        import torch

        iface = self.mods.kv_cache_interface
        common = {"block_size": int(group[1]), "num_kv_heads": 1, "head_size": 1,
                  "dtype": torch.float16}
        if group[0] == "full":
            return iface.FullAttentionSpec(**common)
        if group[0] == "window":
            return iface.SlidingWindowSpec(**common, sliding_window=int(group[2]))
        raise ValueError(f"unknown group kind {group[0]!r}")

    def create(self, config: ManagerConfig) -> Any:
        iface = self.mods.kv_cache_interface
        groups = [iface.KVCacheGroupSpec([f"layer{i}"], self._spec(g))
                  for i, g in enumerate(config.groups)]
        kv_config = iface.KVCacheConfig(num_blocks=config.num_blocks, kv_cache_tensors=[],
                                        kv_cache_groups=groups)
        def build() -> Any:
            return self.manager_class(
                kv_config, max_model_len=config.max_model_len,
                scheduler_block_size=math.lcm(config.hash_block_size, *config.block_sizes),
                hash_block_size=config.hash_block_size, enable_caching=True,
                enable_kv_cache_events=config.events, log_stats=config.log_stats)

        if self.pool_cls is None:
            return build()
        # The coordinator looks ``BlockPool`` up in its module when it is constructed; the
        # modules are shared with the release's own target, so the swap lasts one call.
        coordinator: Any = self.mods.kv_cache_coordinator
        with _SWAP:
            own = coordinator.BlockPool
            coordinator.BlockPool = self.pool_cls
            try:
                return build()
            finally:
                coordinator.BlockPool = own

    def hasher(self, hash_block_size: int) -> Callable[[Any], Sequence[bytes]]:
        fn: Callable[[Any], Sequence[bytes]] = self.mods.kv_cache_utils.get_request_block_hasher(
            hash_block_size, self.mods.hash_fn())
        return fn


def vllm_v1_manager() -> ManagerTarget:
    """The newest supported release's KVCacheManager (0.34.0) from the cached wheel (needs
    torch)."""
    return ManagerTarget("vllm", load_manager())


def vllm_v033_manager() -> ManagerTarget:
    """vLLM 0.33.0's KVCacheManager from the cached wheel (needs torch)."""
    return ManagerTarget("vllm", load_manager(version="0.33.0"))


def vllm_v034_manager() -> ManagerTarget:
    """vLLM 0.34.0's KVCacheManager from the cached wheel (needs torch)."""
    return ManagerTarget("vllm", load_manager(version="0.34.0"))


def vllm_v1_manager_on_pool(pool_spec: str) -> ManagerTarget:
    """vLLM 0.33.0's own KVCacheManager (the release the bundled pool follows) running on the
    ``BlockPool`` class ``pool_spec`` (``module:Class``, a subclass-compatible pool such as the
    bundled one).

    The pool publishes events built from the release's event classes (the ones the manager
    and its publisher know), through the pool's ``kv_event_classes`` hook."""
    pool = resolve(pool_spec)
    if not isinstance(pool, type):
        raise TargetError(f"{pool_spec!r} is not a BlockPool class")
    mods = load_manager(version="0.33.0")
    release = mods.block_pool  # its event classes are the ones the release imported
    events = types.SimpleNamespace(BlockStored=release.BlockStored,
                                   BlockRemoved=release.BlockRemoved,
                                   AllBlocksCleared=release.AllBlocksCleared)
    pool_cls = type(pool.__name__, (pool,), {"kv_event_classes": events,
                                             "__module__": pool.__module__})
    return ManagerTarget("vllm+" + pool.__module__.split(".")[0], mods, pool_cls=pool_cls)


def vllm_v1_manager_on_bundled_pool() -> ManagerTarget:
    """vLLM 0.33.0's own KVCacheManager on the bundled ``prefixcache.v1`` BlockPool."""
    return vllm_v1_manager_on_pool(DEFAULT_POOL_SPEC)
