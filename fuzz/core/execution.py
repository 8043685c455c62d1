"""One fuzz input, end to end: decode it against a target one operation at a time (the
target's family's decoder), run each operation through the family's runner, and judge it with
its oracle.

Contract: :func:`execute` never raises for anything the target does; a broken invariant, or a
misbehaviour the runner itself reports (its ``Violation``; the outcome list then stops one
short of the program), comes back as ``Execution.violation`` located at its step, and a
program the oracle can no longer judge (``OutOfContract``, including ``Inconclusive``) ends
early with the reason in ``stopped``. Exceptions that escape are bugs of the suite itself
(model, runner, decoder).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models.core.invariants import Violation
from properties.core.family import Runner
from properties.core.targets import Target

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
    runner: Runner | None = None

    @property
    def failed(self) -> bool:
        return self.violation is not None


def execute(data: bytes, target: Target, level: Any, *, max_ops: int | None = None
            ) -> Execution:
    """Decode ``data`` against ``target`` and judge every step (``max_ops``: None, the
    family's ``max_ops``)."""
    family = target.family_object
    decoder = family.decoder(data, level, target.caps,
                             max_ops=family.max_ops if max_ops is None else max_ops)
    config = decoder.config
    result = Execution(level, config)
    oracle = family.oracle(config)
    try:  # a misbehaving factory is a verdict too
        runner = result.runner = family.runner(target, config)
        oracle.initial_check(runner.snapshot())
        decoder.use_adapter(**adapter_features(runner))
    except Violation as violation:
        result.violation = violation
        return result
    previous = "start"
    while (op := decoder.next_op(oracle)) is not None:
        try:
            outcome, snapshot = runner.execute(op)
        except Violation as violation:  # the runner's own verdict: the target misbehaved
            result.program.append(op)
            result.violation = violation if violation.op is not None else \
                violation.at(op, len(result.program) - 1)
            result.features.add(("violation", violation.family.value, op.kind))
            break
        result.program.append(op)
        result.outcomes.append(outcome)
        result.features.update(family.step_features(previous, op, outcome, snapshot, oracle))
        previous = op.kind
        try:
            oracle.step(op, outcome, snapshot)
        except Violation as violation:
            result.violation = violation.at(op, len(result.program) - 1)
            result.features.add(("violation", violation.family.value, op.kind))
            break
        except family.out_of_contract as why:
            result.stopped = f"{type(why).__name__}: {why}"
            break
    result.op_starts = decoder.op_starts
    result.consumed = decoder.src.consumed
    return result


def decodable_kinds(target: Target, level: Any) -> frozenset[str]:
    """The operation kinds the decoder can produce against ``target`` (its capabilities, and
    whether its adapter finds the engine's trackers): what a seed corpus should cover."""
    family = target.family_object
    runner = execute(b"", target, level).runner
    decoder = family.decoder(b"", level, target.caps, max_ops=family.max_ops)
    if runner is not None:
        decoder.use_adapter(**adapter_features(runner))
    return decoder.kinds()


def adapter_features(runner: Runner) -> dict[str, bool]:
    """What the decoder offers beyond the capabilities (the family's
    :meth:`~properties.core.family.Family.adapter_features` of the runner's target)."""
    return runner.target.family_object.adapter_features(runner)
