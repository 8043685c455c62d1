"""Fuzz harness (OSS-Fuzz naming): the block-level allocator API.

Allocate (mutable, immutable, chains; cache hits), append (copy-on-write, promotion), fork,
free, swap whole chains, mark accessed and computed, the counting and lookup queries, the null
block, and typed-error misuse, each step judged by the oracle and the shadow KV memory.

    python fuzz/families/v0/fuzz_block_level.py [--allocator SPEC] [libFuzzer flags] [CORPUS...]
"""

from __future__ import annotations

import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.harness import Harness
    from fuzz.families.v0.decoder import Level

HARNESS = Harness(Level.BLOCK)


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
