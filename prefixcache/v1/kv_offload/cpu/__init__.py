"""The CPU tier: a pool of ``num_chunks`` chunk slots managed by a cache policy."""
