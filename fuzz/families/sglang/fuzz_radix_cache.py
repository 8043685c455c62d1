"""Fuzz harness (OSS-Fuzz naming): SGLang's radix cache through its Hypothesis machine.

The family has no decoder: the bytes drive ``TestRadixCache``
(``properties/families/sglang/machines/test_sglang.py``) through Hypothesis's
``fuzz_one_input`` (:mod:`fuzz.core.machine_harness`), and a
:class:`~models.core.invariants.Violation` is the crash. The cache is ``--allocator SPEC``
(taken out of ``sys.argv`` before libFuzzer sees it), ``$PREFIXCACHE_ALLOCATOR``, else the
bundled radix cache. The built-in engine runs it through ``python -m fuzz --family sglang run``.

    python fuzz/families/sglang/fuzz_radix_cache.py [--allocator SPEC] [libFuzzer flags] [CORPUS...]
"""

from __future__ import annotations

import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.machine_harness import harness_for

    HARNESS = harness_for("radix_cache", family="sglang")  # imports the family and its model


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
