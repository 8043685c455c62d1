"""Suite speed: how fast the state machines run with the model and the shadow memory on, and
what the checking costs next to the allocator itself.

A machine run is instrumented, not modified: after ``setup`` the runner's ``execute`` and
``snapshot`` and the oracle's ``step`` are wrapped with timers, and at teardown the runner's
log (the exact calls made) is kept. The same logs are then compiled (``benchmarks.compiled``)
and executed bare against fresh allocators, so "bare allocator time" covers exactly the
operations the suite judged.

Times per run, CPU time of this thread (as the bare runs) unless named wall: ``cpu`` and
``wall`` (everything, Hypothesis included), ``execute`` (the runner interpreting call plans
against the target, snapshot included), ``snapshot`` (reading what the allocator shows),
``oracle`` (model + shadow memory + snapshot comparison: the checking), ``bare``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.stateful import run_state_machine_as_test

from benchmarks.compiled import CLOCK, compile_log, no_gc
from models.families.v0.capabilities import Config
from models.families.v0.operations import Op, Outcome, Snapshot
from models.families.v0.oracle import Oracle, OutOfContract
from properties.core import selection
from properties.core.collector import machine_collector
from properties.core.machine import OracleMachine
from properties.core.targets import Target
from properties.families.v0.machines.block_level import BlockLevelMachine
from properties.families.v0.machines.sequence_level import SequenceLevelMachine
from properties.families.v0.runner import Runner, Step

__all__ = [
    "MACHINES",
    "CheckCost",
    "Judged",
    "MachineRun",
    "Probe",
    "instrumented",
    "judge_again",
    "judge_log",
    "machine_settings",
    "quiet",
    "run_machine",
    "selected",
    "trace_check_cost",
]

MACHINES: dict[str, type[OracleMachine]] = {
    "block": BlockLevelMachine,
    "sequence": SequenceLevelMachine,
}

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class MachineRun:
    """Totals of one instrumented machine run (seconds)."""

    machine: str
    examples: int = 0
    steps: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    execute: float = 0.0
    snapshot: float = 0.0
    oracle: float = 0.0  # judged again, best of repeats (see judge_again)
    oracle_in_run: float = 0.0  # as measured during the run
    bare: float = 0.0
    programs: list[tuple[Config, list[Step]]] = field(default_factory=list, repr=False)

    @property
    def steps_per_second(self) -> float:
        """Steps per second of CPU time (the whole run, Hypothesis included)."""
        return self.steps / self.cpu if self.cpu else 0.0

    @property
    def steps_per_wall_second(self) -> float:
        return self.steps / self.wall if self.wall else 0.0

    @property
    def check_ratio(self) -> float:
        """Model + shadow checking time over the bare allocator time of the same calls."""
        return self.oracle / self.bare if self.bare else float("inf")

    def as_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine, "examples": self.examples, "steps": self.steps,
            "wall_s": self.wall, "cpu_s": self.cpu, "execute_s": self.execute,
            "snapshot_s": self.snapshot, "oracle_s": self.oracle,
            "oracle_in_run_s": self.oracle_in_run, "bare_s": self.bare,
            "steps_per_second": self.steps_per_second,
            "steps_per_wall_second": self.steps_per_wall_second,
            "check_ratio": self.check_ratio,
            "hypothesis_s": max(0.0, self.cpu - self.execute - self.oracle_in_run),
        }


class _Timer:
    """Accumulates the CPU time (``CLOCK``, as the bare runs use) spent in wrapped calls."""

    def __init__(self) -> None:
        self.ns = 0

    @property
    def seconds(self) -> float:
        return self.ns / 1e9

    def wrap(self, fn: F) -> F:
        clock = CLOCK

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.ns += clock() - start

        return timed  # type: ignore[return-value]


@dataclass(slots=True)
class Judged:
    """What the oracle was given for one example: enough to judge it again, alone."""

    config: Config
    initial: Snapshot
    steps: list[tuple[Op, Outcome, Snapshot]] = field(default_factory=list)


@dataclass
class Probe:
    """Timers shared by every example of one run, the programs they executed and the
    oracle's inputs."""

    execute: _Timer = field(default_factory=_Timer)
    snapshot: _Timer = field(default_factory=_Timer)
    oracle: _Timer = field(default_factory=_Timer)
    programs: list[tuple[Config, list[Step]]] = field(default_factory=list)
    judged: list[Judged] = field(default_factory=list)
    examples: int = 0

    def attach(self, runner: Runner, oracle: Oracle, config: Config) -> None:
        """Time (and record) every later call; call right after the initial check."""
        record = Judged(config, runner.snapshot())
        self.judged.append(record)
        # Instance attributes shadow the methods, also for the runner's own self.snapshot().
        runner.execute = self.execute.wrap(runner.execute)  # type: ignore[method-assign]
        runner.snapshot = self.snapshot.wrap(runner.snapshot)  # type: ignore[method-assign]
        timed_step = self.oracle.wrap(oracle.step)

        def step(op: Op, outcome: Outcome, after: Snapshot) -> None:
            record.steps.append((op, outcome, after))
            timed_step(op, outcome, after)

        oracle.step = step  # type: ignore[method-assign]


def judge_again(judged: Sequence[Judged], repeats: int) -> float:
    """CPU seconds the oracle alone needs for the recorded inputs: per example the best of
    ``repeats`` fresh oracles, collector off (as the bare runs). Stops an example where it
    left the contract, as the run did."""
    total = 0
    for record in judged:
        best: int | None = None
        for _ in range(repeats):
            oracle = Oracle(record.config)
            oracle.initial_check(record.initial)
            with no_gc():
                start = CLOCK()
                try:
                    for op, outcome, after in record.steps:
                        oracle.step(op, outcome, after)
                except OutOfContract:
                    pass
                elapsed = CLOCK() - start
            best = elapsed if best is None else min(best, elapsed)
        total += best or 0
    return total / 1e9


def instrumented(base: type[OracleMachine], probe: Probe) -> type[OracleMachine]:
    """``base`` with its runner and oracle timed and its programs recorded into ``probe``."""

    class Instrumented(base):  # type: ignore[valid-type,misc]
        def setup(self, config: Config) -> None:
            super().setup(config)
            probe.attach(self.runner, self.oracle, config)
            probe.examples += 1

        def teardown(self) -> None:
            runner = getattr(self, "runner", None)  # absent if setup never ran
            if isinstance(runner, Runner):
                probe.programs.append((self.config, list(runner.log)))
            super().teardown()

    Instrumented.__name__ = Instrumented.__qualname__ = f"Timed{base.__name__}"
    return Instrumented


def machine_settings(max_examples: int, steps: int, *, shrink: bool = False) -> settings:
    """Derandomized (the same examples every run), no database, no deadline."""
    phases = [Phase.explicit, Phase.reuse, Phase.generate]
    if shrink:
        phases.append(Phase.shrink)
    return settings(max_examples=max_examples, stateful_step_count=steps, derandomize=True,
                    database=None, deadline=None, phases=phases, print_blob=False,
                    verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck))


@contextmanager
def quiet() -> Iterator[None]:
    """Silence allocator warnings (e.g. refused prefix-cache resets) during runs; nests."""
    previous = logging.root.manager.disable
    logging.disable(max(previous, logging.WARNING))
    try:
        yield
    finally:
        logging.disable(previous)


@contextmanager
def selected(target: Target) -> Iterator[None]:
    """Make ``target`` the session's target for the machines, then restore the choice."""
    saved = selection._current
    selection.use(target)
    try:
        yield
    finally:
        selection._current = saved


def run_machine(name: str, target: Target, max_examples: int, steps: int,
                repeats: int = 3) -> MachineRun:
    """Run machine ``name`` against ``target`` (which must pass); then, for the ratio, judge
    its recorded steps again and replay its programs bare (best of ``repeats`` each; 0 skips
    both)."""
    probe = Probe()
    cls = instrumented(MACHINES[name], probe)
    with selected(target), quiet(), machine_collector():  # as the plugin runs machines
        start, start_cpu = time.perf_counter(), CLOCK()
        run_state_machine_as_test(cls, settings=machine_settings(max_examples, steps))
        wall, cpu = time.perf_counter() - start, (CLOCK() - start_cpu) / 1e9
    result = MachineRun(name, probe.examples, sum(len(log) for _, log in probe.programs), wall,
                        cpu, probe.execute.seconds, probe.snapshot.seconds,
                        oracle_in_run=probe.oracle.seconds, programs=probe.programs)
    if repeats > 0:
        result.oracle = judge_again(probe.judged, repeats)
        with quiet():
            for config, log in probe.programs:
                if log:
                    program = compile_log(target, config, log, name=f"{name}-example")
                    result.bare += min(program.run_plain() for _ in range(repeats))
    return result


def judge_log(target: Target, config: Config, log: Sequence[Step]) -> None:
    """Judge a recorded example's operations again (runner + oracle, no Hypothesis); stops
    where the example left the contract (Hypothesis rejected it there)."""
    runner = Runner(target, config)
    oracle = Oracle(config)
    oracle.initial_check(runner.snapshot())
    for step in log:
        outcome, after = runner.execute(step.op)
        try:
            oracle.step(step.op, outcome, after)
        except OutOfContract:
            return


# --------------------------------------------------------------------------- serving trace


@dataclass(frozen=True, slots=True)
class CheckCost:
    """The oracle over a serving trace: seconds per part, for ``ops`` operations."""

    ops: int
    execute: float
    snapshot: float
    oracle: float
    bare: float

    @property
    def check_ratio(self) -> float:
        return self.oracle / self.bare if self.bare else float("inf")

    def as_dict(self) -> dict[str, Any]:
        return {"ops": self.ops, "execute_s": self.execute, "snapshot_s": self.snapshot,
                "oracle_s": self.oracle, "bare_s": self.bare, "check_ratio": self.check_ratio}


def trace_check_cost(target: Target, config: Config, program: Sequence[Op],
                     repeats: int = 3) -> CheckCost:
    """Judge ``program`` step by step (raising the first violation), timing each part; then
    judge the recorded steps again and time the same calls bare (best of ``repeats``)."""
    runner = Runner(target, config)
    oracle = Oracle(config)
    probe = Probe()
    oracle.initial_check(runner.snapshot())
    probe.attach(runner, oracle, config)
    for index, op in enumerate(program):
        outcome, after = runner.execute(op)
        try:
            oracle.step(op, outcome, after)
        except Exception as exc:
            exc.add_note(f"at operation {index}: {op!r}")
            raise
    compiled = compile_log(target, config, runner.log, name="trace-check")
    bare = min(compiled.run_plain() for _ in range(repeats))
    return CheckCost(len(program), probe.execute.seconds, probe.snapshot.seconds,
                     judge_again(probe.judged, repeats), bare)
