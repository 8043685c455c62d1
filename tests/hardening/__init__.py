"""Hardening tests: misuse of every public operation, and cache isolation by extra keys."""
