"""What every state machine shares: one target, one oracle, one runner per example, and a
step that executes an operation, judges it, and turns a violation into a readable failure with
a replayable script."""

from __future__ import annotations

from typing import Any

from hypothesis import note, reject
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine

from models.core.invariants import Violation
from models.families.v0.capabilities import Config
from models.families.v0.operations import Dev, Op
from models.families.v0.oracle import Oracle, OutOfContract
from properties.core.baseline import attach
from properties.core.reproducer import render_script
from properties.core.selection import current_target
from properties.core.shrink import shrunk_log
from properties.core.targets import Target
from properties.families.v0.runner import Runner


def _final_run() -> bool:
    """Whether this is the example Hypothesis reports (not one tried while searching)."""
    try:
        return bool(current_build_context().is_final)
    except InvalidArgument:  # outside a Hypothesis test (a machine driven by hand)
        return False


class OracleMachine(RuleBasedStateMachine):
    """Base class: subclasses call :meth:`setup` from an ``@initialize`` rule and :meth:`do`
    from every rule."""

    target: Target
    config: Config
    runner: Runner
    oracle: Oracle

    def __init__(self) -> None:
        super().__init__()
        self.target = current_target()
        self.clock = 0.0

    def setup(self, config: Config) -> None:
        self.config = config
        self.runner = Runner(self.target, config)
        self.oracle = Oracle(config)
        note(f"target: {self.target.describe()}")
        note(f"config: {config}")
        self.judge(lambda: self.oracle.initial_check(self.runner.snapshot()), None)

    @property
    def caps(self) -> Any:
        return self.target.caps

    def devices(self) -> tuple[Dev, ...]:
        return (Dev.GPU, Dev.CPU) if self.config.num_cpu_blocks else (Dev.GPU,)

    def skip_if_unsafe(self, op: Op) -> bool:
        """A target that does not claim atomicity is not fed operations that would fail half
        way (the model knows exactly which)."""
        return not self.caps.atomic and self.oracle.would_fail_no_free(op)

    def do(self, op: Op) -> None:
        """Execute ``op`` on the target and judge it."""
        if self.skip_if_unsafe(op):
            return
        try:
            outcome, snapshot = self.runner.execute(op)
        except Violation as violation:
            self.fail(violation)
        index = len(self.runner.log) - 1
        self.judge(lambda: self.oracle.step(op, outcome, snapshot), (op, index))

    def _ok(self, op: Op) -> bool:
        """Run ``op`` (through :meth:`do`); whether it ran and succeeded."""
        before = len(self.runner.log)
        self.do(op)
        return len(self.runner.log) > before and self.runner.log[-1].outcome.error is None

    def judge(self, check: Any, where: tuple[Op, int] | None) -> None:
        try:
            check()
        except OutOfContract:
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
        adapter = self.runner.adapter
        config, log, shown = self.config, self.runner.log, violation
        title = "Replay it as a plain Python script"
        shorter = shrunk_log(self.target, config, log, violation) if _final_run() else None
        if shorter is not None:
            config, log, shown = shorter
            title += (f" (shrunk from {len(self.runner.log)} to {len(log)} steps, "
                      f"on {config.num_gpu_blocks} GPU and {config.num_cpu_blocks} CPU blocks; "
                      f"it fails with:\n{shown})")
        script = render_script(self.target, config, log, adapter.device_enum.__module__,
                               adapter.block_table_cls.__module__, shown)
        violation.add_note(title + ":\n\n" + script)
        attach(violation, config, [step.op for step in log], self.target.allocator_type, script,
               shown)
        raise violation

    def tick(self, step: float) -> float:
        """A monotonic clock for ``mark_blocks_as_accessed`` (steps of 0 make ties)."""
        self.clock += step
        return self.clock
