"""Fuzz harness (OSS-Fuzz naming): the v1 ``BlockPool`` at block level.

Bytes decode into the v1 pool vocabulary (:mod:`fuzz.families.v1.decoder`); each step is
judged by the v1 executor (model, key contract, event replay, misuse probes) and a
:class:`~models.core.invariants.Violation` is the crash. The pool is ``--allocator SPEC``
(taken out of ``sys.argv`` before libFuzzer sees it), ``$PREFIXCACHE_ALLOCATOR``,
``$PREFIXCACHE_POOL``, else the bundled pool. The built-in engine runs it through
``python -m fuzz --family v1 run pool``.

    python fuzz/families/v1/fuzz_pool.py [--allocator SPEC] [libFuzzer flags] [CORPUS...]
"""

from __future__ import annotations

import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.harness import Harness
    from fuzz.families.v1.decoder import Level

HARNESS = Harness(Level.POOL, family="v1")


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
