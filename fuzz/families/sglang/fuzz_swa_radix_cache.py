"""Fuzz harness (OSS-Fuzz naming): SGLang's FULL + SWA radix cache through its Hypothesis
machine.

The bytes drive ``TestSwaRadixCache`` (``properties/families/sglang/machines/test_sglang_swa.py``)
through Hypothesis's ``fuzz_one_input`` (:mod:`fuzz.core.machine_harness`); a
:class:`~models.core.invariants.Violation` is the crash. The cache is ``--allocator SPEC`` (a
FULL + SWA tree, taken out of ``sys.argv`` before libFuzzer sees it), ``$PREFIXCACHE_ALLOCATOR``,
else the bundled ``SWARadixCache`` (set here as the default: the family's own default is the
FULL tree, which this level does not judge).

    python fuzz/families/sglang/fuzz_swa_radix_cache.py [--allocator SPEC] [flags] [CORPUS...]
"""

from __future__ import annotations

import os
import sys

from fuzz.core.instrumentation import instrumented

os.environ.setdefault("PREFIXCACHE_ALLOCATOR",
                      "prefixcache.sglang.srt.mem_cache.swa_radix_cache:SWARadixCache")

with instrumented(__name__ == "__main__"):
    from fuzz.core.machine_harness import harness_for

    HARNESS = harness_for("swa_radix_cache", family="sglang")  # imports the family and its model


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
