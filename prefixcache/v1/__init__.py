"""Bundled reference for vLLM v1's KV-cache block pool (``vllm.v1.core``, release 0.33.0).

Module, class, method and parameter names mirror upstream, so an engine switches imports,
not code::

    from prefixcache.v1.core.block_pool import BlockPool          # was vllm.v1.core.block_pool
    from prefixcache.v1.core.kv_cache_utils import KVCacheBlock   # was vllm.v1.core.kv_cache_utils

Where upstream is a defect the pool departs from it; each departure is listed in
``prefixcache/v1/DEPARTURES.md``. The package uses the standard library only.
"""

from __future__ import annotations

#: Capability claims read by the suite (same vocabulary as the v0 package).
PREFIXCACHE_CLAIMS = frozenset({"atomic", "typed_errors", "lru", "misuse_errors"})

__all__ = ["PREFIXCACHE_CLAIMS"]
