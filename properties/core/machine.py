"""What every state machine shares: one target and one judge per example (from the target's
family), and a step that runs an operation through the judge and turns a violation into a
readable failure with a replayable script."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from hypothesis import note, reject
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine

from models.core.invariants import Violation
from properties.core.baseline import attach_run
from properties.core.family import Family, Judge, Step
from properties.core.reproducer import render_script
from properties.core.rule_choice import install as install_rule_choice
from properties.core.selection import current_target
from properties.core.shrink import shrunk_log
from properties.core.targets import Target


def _final_run() -> bool:
    """Whether this is the example Hypothesis reports (not one tried while searching)."""
    try:
        return bool(current_build_context().is_final)
    except InvalidArgument:  # outside a Hypothesis test (a machine driven by hand)
        return False


class OracleMachine(RuleBasedStateMachine):
    """Base class: subclasses call :meth:`setup` from an ``@initialize`` rule and :meth:`do`
    from every rule. A family's machines narrow ``config`` and ``judge`` to its own types."""

    target: Target
    family: Family
    config: Any
    judge: Judge
    #: Whether this example absorbed a violation (an expected failure, or under ``--all`` any
    #: deviation: :mod:`properties.core.plugin`); its later :meth:`do` calls run nothing, so a
    #: rule that reads what an operation returned stops here.
    absorbed: bool = False

    def __init__(self) -> None:
        super().__init__()
        install_rule_choice(self)  # the same rules from the same choices, drawn faster
        self.target = current_target()
        self.family = self.target.family_object
        self.clock = 0.0

    def setup(self, config: Any) -> None:
        self.config = config
        note(f"target: {self.target.describe()}")
        note(f"config: {config}")
        try:
            self.judge = self.family.judge(self.target, config)
        except self.family.out_of_contract:
            reject()
        except Violation as violation:
            self.fail(violation, [])

    @property
    def caps(self) -> Any:
        return self.target.caps

    def skip_if_unsafe(self, op: Any) -> bool:
        """Whether ``op`` is not fed to this target at all (a family's machines decide; here:
        never)."""
        return False

    def do(self, op: Any) -> None:
        """Execute ``op`` on the target and judge it."""
        if self.skip_if_unsafe(op):
            return
        try:
            self.judge.step(op)
        except self.family.out_of_contract:
            reject()
        except Violation as violation:
            self.fail(violation)

    def fail(self, violation: Violation, log: Sequence[Step] | None = None) -> NoReturn:
        """Raise ``violation`` with a replayable script. In the run Hypothesis reports (its
        final one), the script is of the program shrunk further, operation by operation
        (:mod:`properties.core.shrink`): one rule may run several operations the failure does not
        need, which rule-level shrinking cannot drop."""
        config, shown = self.config, violation
        log = list(self.judge.log) if log is None else list(log)
        title = "Replay it as a plain Python script"
        shorter = shrunk_log(self.target, config, log, violation) if _final_run() else None
        if shorter is not None:
            steps = len(log)
            config, log, shown = shorter
            geometry = self.family.vocabulary.geometry(config)
            shape = ", ".join(f"{k} {v}" for k, v in geometry.items())
            title += (f" (shrunk from {steps} to {len(log)} steps, on {shape}; "
                      f"it fails with:\n{shown})")
        judge = getattr(self, "judge", None) if shorter is None else None
        script = render_script(self.target, config, log, shown, judge)
        violation.add_note(title + ":\n\n" + script)
        attach_run(violation, self.target, config, [step.op for step in log], script, shown)
        raise violation

    def tick(self, step: float) -> float:
        """A monotonic clock for access times (steps of 0 make ties)."""
        self.clock += step
        return self.clock
