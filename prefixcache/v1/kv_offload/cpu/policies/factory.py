"""Cache policies by name (upstream ``cpu/policies/factory.py``): ``lru`` and ``arc``."""

from __future__ import annotations

from collections.abc import Callable

from prefixcache.v1.kv_offload.cpu.policies.base import CachePolicy
from prefixcache.v1.kv_offload.errors import OffloadArgumentError

__all__ = ["CachePolicyFactory"]


class CachePolicyFactory:
    """Registry of policy classes by name."""

    _registry: dict[str, Callable[[], type[CachePolicy]]] = {}

    @classmethod
    def register_cache_policy(cls, name: str, loader: Callable[[], type[CachePolicy]]) -> None:
        """Register ``loader`` (returns the class) under ``name``; a name registers once."""
        if name in cls._registry:
            raise OffloadArgumentError(f"cache policy {name!r} is already registered")
        cls._registry[name] = loader

    @classmethod
    def get_cache_policy_cls(cls, name: str) -> type[CachePolicy]:
        """The class registered as ``name``; OffloadArgumentError if none."""
        loader = cls._registry.get(name)
        if loader is None:
            raise OffloadArgumentError(
                f"unknown cache policy {name!r}; registered: {sorted(cls._registry)}")
        return loader()


def _lru() -> type[CachePolicy]:
    from prefixcache.v1.kv_offload.cpu.policies.lru import LRUCachePolicy
    return LRUCachePolicy


def _arc() -> type[CachePolicy]:
    from prefixcache.v1.kv_offload.cpu.policies.arc import ARCCachePolicy
    return ARCCachePolicy


CachePolicyFactory.register_cache_policy("lru", _lru)
CachePolicyFactory.register_cache_policy("arc", _arc)
