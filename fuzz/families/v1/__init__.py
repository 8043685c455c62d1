"""The v1 family's fuzzing: its pool machine driven by fuzz inputs (``fuzz_pool_level.py``, the
machine route) and its zoo (``zoo.py``)."""
