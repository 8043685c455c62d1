"""Fuzz harness (OSS-Fuzz naming): content hashing under adversarial keys.

Blocks and tables of collision-prone token ids (-1 and -2, values congruent modulo 2**61 - 1,
int64 edges and beyond) and extra keys, plus near misses: cached content with one token or the
extra key swapped for a value weak hashes confuse with it. Any hit on different content is a
HASH or CONTENT violation.

With ``PREFIXCACHE_FUZZ_HASH=weak`` (or ``--weak-hash``) the bundled allocator is built with
:func:`fuzz.families.v0.weak_hash.weak_hash` injected: the harness must then find collisions, which
shows the content checks catch them rather than the default hash merely avoiding them.

    python fuzz/families/v0/fuzz_hashing.py [--weak-hash] [--allocator SPEC] [libFuzzer flags]
    [CORPUS...]
"""

from __future__ import annotations

import os
import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.harness import HASH_MODE_VAR, Harness
    from fuzz.families.v0.decoder import Level

HARNESS = Harness(Level.HASHING, weak_hash=os.environ.get(HASH_MODE_VAR) == "weak")


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    if "--weak-hash" in sys.argv:
        sys.argv.remove("--weak-hash")
        HARNESS.weak_hash = True
    HARNESS.fuzz_main(sys.argv)
