"""Fuzz harness (OSS-Fuzz naming): SGLang's radix cache at the request level (admission, chunks
with checkpoints, decode steps, preemption, finishes) through its Hypothesis machine.

The bytes drive ``TestRequestLevel``
(``properties/families/sglang/machines/test_sglang_request.py``) through Hypothesis's
``fuzz_one_input`` (:mod:`fuzz.core.machine_harness`); a
:class:`~models.core.invariants.Violation` is the crash. The cache is ``--allocator SPEC`` (a
target with the request API, taken out of ``sys.argv`` before libFuzzer sees it) or
``$PREFIXCACHE_ALLOCATOR``, else the bundled ``RadixCache``.

    python fuzz/families/sglang/fuzz_request_level.py [--allocator SPEC] [flags] [CORPUS...]
"""

from __future__ import annotations

import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.machine_harness import harness_for

    HARNESS = harness_for("request_level", family="sglang")  # imports the family and its model


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
