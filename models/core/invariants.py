"""Invariant families and the violation the model raises when a target breaks one.

The family names are those of ``INVARIANTS.md``; reports, xfail entries and the self-test zoo
key on them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


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


HIGHER_IS_WORSE = "higher is worse"
LOWER_IS_WORSE = "lower is worse"

# The measures the models and checks attach (names are what xfails entries record).
FREE_COUNT_ERROR = "free count error (blocks)"
HIT_RATE_ERROR = "hit rate error"
FREE_QUEUE_ERROR = "ids missing from or extra in the free queue"
KEY_SPREAD_BITS = "key spread (bits)"
COLLIDING_CONTENTS = "colliding contents among the searched"


@dataclass(frozen=True, slots=True)
class Measure:
    """The size of a finding: ``value`` of ``name`` (free-count error, hit-rate error, a key's
    spread in bits), with which way is worse (:data:`HIGHER_IS_WORSE` or
    :data:`LOWER_IS_WORSE`). An adopted expected failure records it and accepts only findings
    no worse (the ratchet)."""

    name: str
    value: float
    direction: str = HIGHER_IS_WORSE

    def __post_init__(self) -> None:
        if self.direction not in (HIGHER_IS_WORSE, LOWER_IS_WORSE):
            raise ValueError(f"measure {self.name!r}: direction must be {HIGHER_IS_WORSE!r} "
                             f"or {LOWER_IS_WORSE!r}, not {self.direction!r}")

    def worse_than(self, other: Measure) -> bool:
        """Whether this value is strictly worse than ``other``'s (same name)."""
        if self.direction == HIGHER_IS_WORSE:
            return self.value > other.value
        return self.value < other.value

    def worst(self, other: Measure) -> Measure:
        return other if other.worse_than(self) else self

    def __str__(self) -> str:
        return f"{self.name} {self.value:g} ({self.direction})"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "direction": self.direction}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measure:
        return cls(str(data["name"]), float(data["value"]),
                   str(data.get("direction", HIGHER_IS_WORSE)))


def worst_of(old: Sequence[Measure], new: Sequence[Measure]) -> tuple[Measure, ...]:
    """Per name, the worse of the two (names of either kept, in first-seen order)."""
    out = {m.name: m for m in old}
    for m in new:
        out[m.name] = out[m.name].worst(m) if m.name in out else m
    return tuple(out.values())


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
        measure: Measure | Sequence[Measure] | None = None,
    ) -> None:
        self.family = family
        self.message = message
        self.expected = expected
        self.observed = observed
        self.op = op
        self.step = step
        #: The sizes of the finding (none: it has no size); see :class:`Measure`.
        self.measures: tuple[Measure, ...] = (
            () if measure is None else (measure,) if isinstance(measure, Measure)
            else tuple(measure))
        super().__init__(str(self))

    def measured(self, *measures: Measure) -> Violation:
        """The same violation, carrying ``measures`` too (later ones replace same names)."""
        self.measures = tuple({m.name: m for m in (*self.measures, *measures)}.values())
        return self

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
