"""The CPU KV offload tier's specification: its invariants, its operations and a model of the
tier (which keys it serves, which chunks hold what, which chunk the policy evicts)."""
