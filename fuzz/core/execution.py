"""What one fuzz input did (:class:`Execution`), as a harness
(:class:`fuzz.core.machine_harness.MachineHarness`) reports it to the engine, the CLI and the
crash records.

Contract: a harness never raises for anything the target does; a broken invariant or a
misbehaving target (the judge's ``Violation``) comes back as ``Execution.violation``, and a
program the model can no longer judge ends early with the reason in ``stopped``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models.core.invariants import Violation
from properties.core.family import Judge

Feature = tuple[object, ...]

#: Upper ends of the size classes in features: exact up to 4, then long, then past the
#: recursion limit.
SIZE_RUNGS: tuple[int, ...] = (0, 1, 2, 3, 4, 16, 128, 1000)


def size_rung(n: int) -> int:
    """The smallest rung ``>= n``, or one past the last (the class of chains deeper than
    CPython's default recursion limit)."""
    return next((r for r in SIZE_RUNGS if n <= r), SIZE_RUNGS[-1] + 1)


@dataclass
class Execution:
    """What happened to one input: the program run, its outcomes, and the verdict."""

    level: Any  # the family's fuzz level
    config: Any  # the family's pool shape
    program: list[Any] = field(default_factory=list)
    outcomes: list[Any] = field(default_factory=list)
    violation: Violation | None = None
    stopped: str | None = None
    features: set[Feature] = field(default_factory=set)
    op_starts: list[int] = field(default_factory=list)
    consumed: int = 0
    judge: Judge | None = None

    @property
    def failed(self) -> bool:
        return self.violation is not None
