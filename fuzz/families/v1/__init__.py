"""The v1 family's fuzzing: bytes -> v1 BlockPool operations -> the v1 executor."""
