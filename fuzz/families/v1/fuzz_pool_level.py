"""Fuzz harness (OSS-Fuzz naming): the v1 ``BlockPool`` through its pool machine.

The v1 family has one generator, its Hypothesis pool machine
(``properties/families/v1/machines/test_pool.py``); here it draws its programs from the
fuzzer's bytes (:mod:`fuzz.core.machine_harness`): every step is judged by the v1 executor
(model, key contract, event replay, misuse probes) and a
:class:`~models.core.invariants.Violation` is the crash, its program written beside the
input as a ``.json`` record that replays without it. The pool is ``--allocator SPEC`` (taken
out of ``sys.argv`` before libFuzzer sees it), ``$PREFIXCACHE_ALLOCATOR``,
``$PREFIXCACHE_POOL``, else the bundled pool. The built-in engine runs the same harness
through ``python -m fuzz --family v1 run``.

    python fuzz/families/v1/fuzz_pool_level.py [--allocator SPEC] [libFuzzer flags] [CORPUS...]
"""

from __future__ import annotations

import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.machine_harness import harness_for

    HARNESS = harness_for("pool_level", family="v1")  # imports the family and its model


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
