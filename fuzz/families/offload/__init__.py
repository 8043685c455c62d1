"""The offload family's fuzz tools: its zoo (the family is fuzzed through its machines)."""
