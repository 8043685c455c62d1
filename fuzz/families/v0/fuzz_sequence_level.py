"""Fuzz harness (OSS-Fuzz naming): ``BlockTable``s driven as an engine drives them, through the
sequence-level machine.

Prompts sharing system prefixes, decode appends with lookahead slots, sliding windows, parallel
sampling forks, preemption by swapping whole tables to the CPU and back, frees, and table misuse.
The v0 family has one generator, its Hypothesis machines
(``properties/families/v0/machines/sequence_level.py``); here the machine draws its program from the
fuzzer's bytes (:mod:`fuzz.core.machine_harness`): every step is judged by the oracle and the shadow
KV memory, and a :class:`~models.core.invariants.Violation` is the crash, its program written beside
the input as a ``.json`` record that replays without it. The target is ``--allocator SPEC`` (taken
out of ``sys.argv`` before libFuzzer sees it), ``$PREFIXCACHE_ALLOCATOR``, else the bundled
allocator; ``python -m fuzz --family v0 run sequence_level`` runs the same harness with the built-in
engine.

    python fuzz/families/v0/fuzz_sequence_level.py [--allocator SPEC] [libFuzzer flags]
    [CORPUS...]
"""

from __future__ import annotations

import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.machine_harness import harness_for

    HARNESS = harness_for("sequence_level", family="v0")  # imports the family and its model


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
