"""``sglang.srt.mem_cache``: the radix cache and the token-slot allocators."""
