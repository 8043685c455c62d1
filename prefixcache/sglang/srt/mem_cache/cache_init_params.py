"""``CacheInitParams`` (``sglang.srt.mem_cache.cache_init_params``): the fields the bundled tree
reads. ``token_to_kv_pool_allocator`` receives evicted slots and insert's duplicates; None makes
a simulated tree that frees nothing."""

from __future__ import annotations

import dataclasses

from prefixcache.sglang.srt.mem_cache.allocator import BaseTokenToKVPoolAllocator
from prefixcache.sglang.srt.mem_cache.swa_allocator import SWATokenToKVPoolAllocator

__all__ = ["CacheInitParams"]


@dataclasses.dataclass
class CacheInitParams:
    disable: bool
    req_to_token_pool: object
    token_to_kv_pool_allocator: BaseTokenToKVPoolAllocator | SWATokenToKVPoolAllocator | None
    page_size: int
    is_eagle: bool = False
    eviction_policy: str = "lru"
    #: The sliding window (``SWARadixCache`` only): a request reads the SWA KV of its last
    #: ``sliding_window_size`` tokens.
    sliding_window_size: int | None = None
