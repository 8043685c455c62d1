"""What the v0 machines share on top of :class:`properties.core.machine.OracleMachine`: the
v0 judge's runner and oracle, the pool shape, the devices of the pool, and not feeding a target
that does not claim atomicity operations that would fail half way."""

from __future__ import annotations

from typing import cast

from models.families.v0.capabilities import Config
from models.families.v0.operations import Dev, Op
from models.families.v0.oracle import Oracle
from properties.core.machine import OracleMachine
from properties.families.v0.judge import V0Judge
from properties.families.v0.runner import Runner


class V0Machine(OracleMachine):
    """Base class of the v0 block-manager machines."""

    config: Config

    @property
    def v0_judge(self) -> V0Judge:
        return cast(V0Judge, self.judge)

    @property
    def runner(self) -> Runner:
        return self.v0_judge.runner

    @property
    def oracle(self) -> Oracle:
        return self.v0_judge.oracle

    def devices(self) -> tuple[Dev, ...]:
        return (Dev.GPU, Dev.CPU) if self.config.num_cpu_blocks else (Dev.GPU,)

    def skip_if_unsafe(self, op: Op) -> bool:
        """A target that does not claim atomicity is not fed operations that would fail half
        way (the model knows exactly which)."""
        return not self.caps.atomic and self.oracle.would_fail_no_free(op)

    def _ok(self, op: Op) -> bool:
        """Run ``op`` (through :meth:`do`); whether it ran and succeeded."""
        before = len(self.runner.log)
        self.do(op)
        return len(self.runner.log) > before and self.runner.log[-1].outcome.error is None
