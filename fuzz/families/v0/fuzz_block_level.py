"""Fuzz harness (OSS-Fuzz naming): the block-level allocator API through its block-level machine.

Allocate (mutable, immutable, chains; cache hits), append (copy-on-write, promotion), fork, free,
swap whole chains, mark accessed and computed, the counting and lookup queries, the null block,
hashing under collision-prone keys, and typed-error misuse. The v0 family has one generator, its
Hypothesis machines (``properties/families/v0/machines/block_level.py``); here the machine draws its
program from the fuzzer's bytes (:mod:`fuzz.core.machine_harness`): every step is judged by the
oracle and the shadow KV memory, and a :class:`~models.core.invariants.Violation` is the crash, its
program written beside the input as a ``.json`` record that replays without it. The target is
``--allocator SPEC`` (taken out of ``sys.argv`` before libFuzzer sees it),
``$PREFIXCACHE_ALLOCATOR``, else the bundled allocator; ``python -m fuzz --family v0 run
block_level`` runs the same harness with the built-in engine.

    python fuzz/families/v0/fuzz_block_level.py [--allocator SPEC] [libFuzzer flags]
    [CORPUS...]
"""

from __future__ import annotations

import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.machine_harness import harness_for

    HARNESS = harness_for("block_level", family="v0")  # imports the family and its model


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
