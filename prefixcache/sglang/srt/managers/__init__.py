"""``sglang.srt.managers``: the request record the cache's request API reads."""
