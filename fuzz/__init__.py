"""Coverage-guided fuzzing of every allocator family.

Each family is fuzzed through its own Hypothesis machines (``fuzz.core.machine_harness``): the
fuzzer's bytes drive the machine's draws, so the programs are the ones the property tests run,
judged the same way. Harnesses (OSS-Fuzz naming, atheris entry points) are
``fuzz/families/<family>/fuzz_<machine level>.py``. ``python -m fuzz`` runs them (atheris when
installed, else the built-in seeded engine), turns crashes into regression tests, measures the
zoos, and records and replays the v0 traces.
"""
