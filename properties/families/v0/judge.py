"""The v0 judge: the runner (the target, driven as an engine would) and the oracle (the
model), one operation at a time.

The runner's own verdicts (a target that misbehaves: raises, returns the wrong types, hangs,
mutates lists) and the oracle's (a broken invariant) both come out of :meth:`V0Judge.step` as a
``Violation`` located at the operation.
"""

from __future__ import annotations

from typing import Any

from models.core.invariants import Violation
from models.families.v0.capabilities import Config
from models.families.v0.operations import Op, Outcome, Snapshot
from models.families.v0.oracle import Oracle
from properties.core.targets import Target
from properties.families.v0.runner import Runner, Step


class V0Judge:
    """A fresh allocator of ``target`` (through the :class:`Runner`) judged by the
    :class:`Oracle`; the fresh state is checked on construction."""

    def __init__(self, target: Target, config: Config) -> None:
        self.runner = Runner(target, config)
        self.oracle = Oracle(config)
        #: What the allocator showed after the last step (the fuzz decoder follows it).
        self.snapshot: Snapshot = self.runner.snapshot()
        self.oracle.initial_check(self.snapshot)

    @property
    def log(self) -> list[Step]:
        return self.runner.log

    @property
    def adapter(self) -> Any:
        return self.runner.adapter

    def step(self, op: Op) -> Outcome:
        index = len(self.runner.log)
        try:
            outcome, snapshot = self.runner.execute(op)
        except Violation as violation:  # the runner's own verdict: the target misbehaved
            if violation.op is None:
                violation.at(op, index)
            raise
        self.snapshot = snapshot
        try:
            self.oracle.step(op, outcome, snapshot)
        except Violation as violation:
            raise violation.at(op, len(self.runner.log) - 1) from None
        return outcome
