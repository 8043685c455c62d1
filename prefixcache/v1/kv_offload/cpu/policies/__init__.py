"""Cache policies of the CPU tier: which chunk to evict (``lru``, ``arc``)."""
