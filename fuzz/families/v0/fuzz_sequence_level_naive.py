"""Fuzz harness (OSS-Fuzz naming): the sequence-level machine against the target's naive allocator
type.

The sequence-level machine's programs against the same factory built as ``naive``
(:func:`properties.families.v0.machines.variants.naive_variant`; a target that cannot build one runs
nothing). The v0 family has one generator, its Hypothesis machines
(``properties/families/v0/machines/sequence_level.py``); here the machine draws its program from the
fuzzer's bytes (:mod:`fuzz.core.machine_harness`): every step is judged by the oracle and the shadow
KV memory, and a :class:`~models.core.invariants.Violation` is the crash, its program written beside
the input as a ``.json`` record that replays without it. The target is ``--allocator SPEC`` (taken
out of ``sys.argv`` before libFuzzer sees it), ``$PREFIXCACHE_ALLOCATOR``, else the bundled
allocator; ``python -m fuzz --family v0 run sequence_level_naive`` runs the same harness with the
built-in engine.

    python fuzz/families/v0/fuzz_sequence_level_naive.py [--allocator SPEC] [libFuzzer flags]
    [CORPUS...]
"""

from __future__ import annotations

import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.machine_harness import harness_for

    HARNESS = harness_for("sequence_level_naive", family="v0")  # imports the family and its model


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
