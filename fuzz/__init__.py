"""Coverage-guided fuzzing over the shared operation vocabulary.

Harnesses (OSS-Fuzz naming, atheris entry points): ``fuzz_block_level``,
``fuzz_sequence_level``, ``fuzz_hashing``. Bytes decode into programs of
``models.families.v0.operations`` (``fuzz.families.v0.decoder``), run against the selected target
and judged by the oracle (``fuzz.core.execution``). ``python -m fuzz`` runs them (atheris when
installed, else the built-in seeded engine), turns crashes into regression tests, and records and
replays traces.
"""
