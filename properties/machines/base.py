"""What every state machine shares: one target, one oracle, one runner per example, and a
step that executes an operation, judges it, and turns a violation into a readable failure with
a replayable script."""

from __future__ import annotations

from typing import Any

from hypothesis import note, reject
from hypothesis.stateful import RuleBasedStateMachine

from models.capabilities import Config
from models.families import Violation
from models.operations import Dev, Op
from models.oracle import Oracle, OutOfContract
from properties.reproducer import render_script
from properties.runner import Runner
from properties.selection import current_target
from properties.targets import Target


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
        adapter = self.runner.adapter
        script = render_script(self.target, self.config, self.runner.log,
                               adapter.device_enum.__module__,
                               adapter.block_table_cls.__module__, violation)
        violation.add_note("Replay it as a plain Python script:\n\n" + script)
        raise violation

    def tick(self, step: float) -> float:
        """A monotonic clock for ``mark_blocks_as_accessed`` (steps of 0 make ties)."""
        self.clock += step
        return self.clock
