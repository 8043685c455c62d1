"""What every state machine shares: one target, one oracle, one runner per example (both
from the target's family), and a step that executes an operation, judges it, and turns a
violation into a readable failure with a replayable script."""

from __future__ import annotations

from typing import Any

from hypothesis import note, reject
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine

from models.core.invariants import Violation
from properties.core.baseline import attach_run
from properties.core.family import Family, Oracle, Runner
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
    from every rule. A family's machines narrow ``config``, ``runner`` and ``oracle`` to its
    own types."""

    target: Target
    family: Family
    config: Any
    runner: Runner
    oracle: Oracle

    def __init__(self) -> None:
        super().__init__()
        install_rule_choice(self)  # the same rules from the same choices, drawn faster
        self.target = current_target()
        self.family = self.target.family_object
        self.clock = 0.0

    def setup(self, config: Any) -> None:
        self.config = config
        self.runner = self.family.runner(self.target, config)
        self.oracle = self.family.oracle(config)
        note(f"target: {self.target.describe()}")
        note(f"config: {config}")
        self.judge(lambda: self.oracle.initial_check(self.runner.snapshot()), None)

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
            outcome, snapshot = self.runner.execute(op)
        except Violation as violation:
            self.fail(violation)
        index = len(self.runner.log) - 1
        self.judge(lambda: self.oracle.step(op, outcome, snapshot), (op, index))

    def _ok(self, op: Any) -> bool:
        """Run ``op`` (through :meth:`do`); whether it ran and succeeded."""
        before = len(self.runner.log)
        self.do(op)
        return len(self.runner.log) > before and self.runner.log[-1].outcome.error is None

    def judge(self, check: Any, where: tuple[Any, int] | None) -> None:
        try:
            check()
        except self.family.out_of_contract:
            reject()
        except Violation as violation:
            if where is not None:
                violation.at(*where)
            self.fail(violation)

    def fail(self, violation: Violation) -> None:
        """Raise ``violation`` with a replayable script. In the run Hypothesis reports (its
        final one), the script is of the program shrunk further, operation by operation
        (:mod:`properties.core.shrink`): one rule may run several operations the failure does not
        need, which rule-level shrinking cannot drop."""
        config, log, shown = self.config, self.runner.log, violation
        title = "Replay it as a plain Python script"
        shorter = shrunk_log(self.target, config, log, violation) if _final_run() else None
        if shorter is not None:
            config, log, shown = shorter
            title += (f" (shrunk from {len(self.runner.log)} to {len(log)} steps, "
                      f"on {config.num_gpu_blocks} GPU and {config.num_cpu_blocks} CPU blocks; "
                      f"it fails with:\n{shown})")
        script = render_script(self.target, config, log, shown, self.runner.adapter)
        violation.add_note(title + ":\n\n" + script)
        attach_run(violation, self.target, config, [step.op for step in log], script, shown)
        raise violation

    def tick(self, step: float) -> float:
        """A monotonic clock for ``mark_blocks_as_accessed`` (steps of 0 make ties)."""
        self.clock += step
        return self.clock
