"""The allocator modules under mutation testing, in the order they are run."""

#: Modules whose executed mutants were all run (the sampled re-runs draw from these).
FULLY_RUN = [
    "prefix_caching_block",
    "evictor",
    "block_table",
    "cpu_gpu_block_allocator",
    "naive_block",
    "common",
]
#: Every mutated module (``hashing`` and ``_validation`` were not finished in the full run).
MODULES = [*FULLY_RUN, "hashing", "_validation"]
