"""Bundled reference for vLLM v1's KV-cache block pool (``vllm.v1.core``, release 0.33.0).

Module, class, method and parameter names mirror upstream, so an engine switches imports,
not code::

    from prefixcache.v1.core.block_pool import BlockPool          # was vllm.v1.core.block_pool
    from prefixcache.v1.core.kv_cache_utils import KVCacheBlock   # was vllm.v1.core.kv_cache_utils

Where upstream is a defect the pool departs from it; each departure is listed in
``prefixcache/v1/DEPARTURES.md``. The package uses the standard library only.
"""

from __future__ import annotations

from prefixcache.errors import PrefixCacheError

#: Capability claims read by the suite (the v0 package's vocabulary): misuse raises a
#: ``PrefixCacheError`` and leaves the pool as it was.
PREFIXCACHE_CLAIMS = {"name": "prefixcache", "atomic": True, "typed_errors": True, "lru": True,
                      "misuse_errors": (PrefixCacheError,)}

__all__ = ["PREFIXCACHE_CLAIMS"]
