"""Fuzz harness (OSS-Fuzz naming): SGLang's FULL + SWA radix cache through its Hypothesis
machine.

The bytes drive ``TestSwaRadixCache`` (``properties/families/sglang/machines/test_sglang_swa.py``)
through Hypothesis's ``fuzz_one_input`` (:mod:`fuzz.core.machine_harness`); a
:class:`~models.core.invariants.Violation` is the crash. The cache is ``--allocator SPEC`` (a
FULL + SWA tree, taken out of ``sys.argv`` before libFuzzer sees it) or
``$PREFIXCACHE_ALLOCATOR``; a target that is not FULL + SWA (the family's default, the FULL
tree) is judged as the bundled ``SWARadixCache`` by the machine itself.

    python fuzz/families/sglang/fuzz_swa_radix_cache.py [--allocator SPEC] [flags] [CORPUS...]
"""

from __future__ import annotations

import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.machine_harness import harness_for

    HARNESS = harness_for("swa_radix_cache", family="sglang")  # imports the family and its model


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
