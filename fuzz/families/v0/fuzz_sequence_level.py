"""Fuzz harness (OSS-Fuzz naming): ``BlockTable``s driven as an engine drives them.

Prompts sharing system prefixes, decode appends with lookahead slots, ensure-slots, parallel
sampling forks, preemption by swapping whole tables to the CPU and back, frees, and table
misuse, each step judged by the oracle and the shadow KV memory.

    python fuzz/families/v0/fuzz_sequence_level.py [--allocator SPEC] [libFuzzer flags] [CORPUS...]
"""

from __future__ import annotations

import sys

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.harness import Harness
    from fuzz.families.v0.decoder import Level

HARNESS = Harness(Level.SEQUENCE)


def TestOneInput(data: bytes) -> None:
    HARNESS.test_one_input(data)


if __name__ == "__main__":
    HARNESS.fuzz_main(sys.argv)
