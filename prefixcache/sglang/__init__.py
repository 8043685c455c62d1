"""Bundled reference for SGLang's radix prefix cache and token-slot allocators (0.5.23 API).

Module, class, method and parameter names mirror upstream, so a scheduler switches imports::

    from prefixcache.sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey
    from prefixcache.sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator

Slot indices are lists of ints, not tensors. Misuse raises a typed error
(:mod:`prefixcache.sglang.errors`) and leaves the cache and the allocator unchanged. The
package uses the standard library only.
"""

from __future__ import annotations

from prefixcache.errors import PrefixCacheError

PREFIXCACHE_CLAIMS = {"name": "prefixcache-sglang", "atomic": True, "typed_errors": True,
                      "lru": True, "misuse_errors": (PrefixCacheError,)}

__all__ = ["PREFIXCACHE_CLAIMS"]
