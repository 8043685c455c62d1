"""Hypothesis state machines: block level and sequence level."""
