"""Fuzz harness (OSS-Fuzz naming): vLLM's CPU offloading manager through its Hypothesis machine.

The family has no decoder: the bytes drive ``TestOffload``
(``properties/families/offload/machines/test_offload.py``) through Hypothesis's
``fuzz_one_input`` (:mod:`fuzz.core.machine_harness`), and a
:class:`~models.core.invariants.Violation` is the crash. The manager is ``--allocator SPEC``
(taken out of ``sys.argv`` before libFuzzer sees it), ``$PREFIXCACHE_ALLOCATOR``, else the
bundled manager. The built-in engine runs it through ``python -m fuzz --family offload run``.

    python fuzz/families/offload/fuzz_offload.py [--allocator SPEC] [libFuzzer flags] [CORPUS...]
"""

from __future__ import annotations

import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.machine_harness import harness_for

    HARNESS = harness_for("offload", family="offload")  # imports the family and its model


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
