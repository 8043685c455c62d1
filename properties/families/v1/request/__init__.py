"""The v1 request level: vLLM's ``KVCacheManager`` driven as its scheduler drives it."""
