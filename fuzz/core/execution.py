"""One fuzz input, end to end: decode it against a target one operation at a time (the
target's family's decoder, :class:`properties.core.roles.Fuzzing`) and run each operation
through the family's judge.

Contract: :func:`execute` never raises for anything the target does; a broken invariant or a
misbehaving target (the judge's ``Violation``; the outcome list then stops one short of the
program) comes back as ``Execution.violation`` located at its step, and a program the model
can no longer judge (the family's ``out_of_contract``) ends early with the reason in
``stopped``. Exceptions that escape are bugs of the suite itself (model, judge, decoder).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models.core.invariants import Violation
from properties.core.family import Judge
from properties.core.roles import Fuzzing
from properties.core.targets import Target, TargetError

Feature = tuple[object, ...]

#: Upper ends of the size classes in features: exact up to 4, then long, then past the
#: recursion limit (the decoder's longest chains).
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


def fuzzing(target: Target) -> Fuzzing:
    """``target``'s family, which must fuzz (:class:`properties.core.roles.Fuzzing`)."""
    family = target.family_object
    if not isinstance(family, Fuzzing):
        raise TargetError(f"family {family.name!r} has no fuzz levels")
    return family


def execute(data: bytes, target: Target, level: Any, *, max_ops: int | None = None
            ) -> Execution:
    """Decode ``data`` against ``target`` and judge every step (``max_ops``: None, the
    family's ``max_ops``)."""
    family = target.family_object
    fuzz = fuzzing(target)
    decoder = fuzz.decoder(data, level, target.caps,
                           max_ops=fuzz.max_ops if max_ops is None else max_ops)
    config = decoder.config
    result = Execution(level, config)
    try:  # a misbehaving factory is a verdict too
        judge = result.judge = family.judge(target, config)
        decoder.attach(judge)
    except Violation as violation:
        result.violation = violation
        return result
    previous = "start"
    while (op := decoder.next_op(judge)) is not None:
        result.program.append(op)
        index = len(result.program) - 1
        try:
            outcome = judge.step(op)
        except Violation as violation:
            if len(judge.log) > index:  # the target answered; the model judged it
                result.outcomes.append(judge.log[index].outcome)
            result.violation = violation if violation.op is not None else \
                violation.at(op, index)
            result.features.add(("violation", violation.family.value, op.kind))
            break
        except family.out_of_contract as why:
            if len(judge.log) > index:
                result.outcomes.append(judge.log[index].outcome)
            result.stopped = f"{type(why).__name__}: {why}"
            break
        result.outcomes.append(outcome)
        result.features.update(fuzz.step_features(previous, op, outcome, judge))
        previous = op.kind
    result.op_starts = decoder.op_starts
    result.consumed = decoder.src.consumed
    return result


def decodable_kinds(target: Target, level: Any) -> frozenset[str]:
    """The operation kinds the decoder can produce against ``target`` (its capabilities, and
    what its judge's target shows): what a seed corpus should cover."""
    fuzz = fuzzing(target)
    judge = execute(b"", target, level).judge
    decoder = fuzz.decoder(b"", level, target.caps, max_ops=fuzz.max_ops)
    if judge is not None:
        decoder.attach(judge)
    return decoder.kinds()
