"""Invariant families and the violation the model raises when a target breaks one.

The family names are those of ``docs/INVARIANTS.md``; reports, xfail entries and the self-test zoo
key on them.
"""

from __future__ import annotations

import enum


class Family(enum.Enum):
    """One invariant family; ``value`` is the short name used in messages."""

    RC = "RC"
    LEAK = "LEAK"
    FREE = "FREE"
    CACHE = "CACHE"
    CONTENT = "CONTENT"
    COW = "COW"
    SWAP = "SWAP"
    HASH = "HASH"
    LRU = "LRU"
    COMPUTED = "COMPUTED"
    HIT = "HIT"
    TABLE = "TABLE"
    ATOMIC = "ATOMIC"
    # Not allocator invariants: the target raised something no contract allows, or broke the
    # calling convention (wrong return types, hangs, lists mutated behind the caller's back).
    CRASH = "CRASH"
    TARGET = "TARGET"


DESCRIPTIONS: dict[Family, str] = {
    Family.RC: "refcounts equal the live handles holding each id",
    Family.LEAK: "every id is in exactly one state; nothing lost, duplicated or double-owned",
    Family.FREE: "free counts are exact and admission checks are sound",
    Family.CACHE: "content map and evictor agree; reused ids forget old content",
    Family.CONTENT: "hits and live sequences read exactly their own content",
    Family.COW: "writes to shared blocks go to a fresh id with exactly one recorded pair",
    Family.SWAP: "swaps preserve content and map source-device ids to destination-device ids",
    Family.HASH: "different content (prefix, tokens, extra keys) never shares a cached block",
    Family.LRU: "the victim is the least recently used, ties to the most hashed tokens",
    Family.COMPUTED: "computed is reported only after marking, as a prefix",
    Family.HIT: "hit-rate counters count each query once",
    Family.TABLE: "table ids, chains and token counts agree; forks of any length work",
    Family.ATOMIC: "a failed operation leaves the allocator exactly as it was",
    Family.CRASH: "the target raised an error no contract allows",
    Family.TARGET: "the target returns the API's types, answers in time and leaves lists alone",
}


class Violation(Exception):
    """A target broke an invariant: which family, on which operation, expected vs observed."""

    def __init__(
        self,
        family: Family,
        message: str,
        *,
        expected: object = None,
        observed: object = None,
        op: object = None,
        step: int | None = None,
    ) -> None:
        self.family = family
        self.message = message
        self.expected = expected
        self.observed = observed
        self.op = op
        self.step = step
        super().__init__(str(self))

    def at(self, op: object, step: int) -> Violation:
        """The same violation, located at ``op`` (step ``step`` of the program)."""
        self.op, self.step = op, step
        self.args = (str(self),)
        return self

    def __str__(self) -> str:
        where = "" if self.op is None else f" at step {self.step}: {self.op!r}"
        parts = [f"[{self.family.value}] {self.message}{where}"]
        if self.expected is not None or self.observed is not None:
            parts.append(f"  expected: {self.expected!r}")
            parts.append(f"  observed: {self.observed!r}")
        return "\n".join(parts)
