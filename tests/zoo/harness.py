"""Running a mutant through the conformance suite, and shrinking what caught it.

A *check* is one of the suite's state machines (``block``, ``sequence``, ``evictor``,
``refcount``) run with ``run_state_machine_as_test`` under a fixed budget (examples x steps with
a fixed seed), the ``long_chain`` program replayed with ``properties.core.replay.run_program``, or
the direct ``hash_quality`` check (``properties.families.v0.hash_quality``; its two-allocation
finding is the program).

Determinism: the same seed must give the same examples whatever else the process imported.
Hypothesis (6.1xx) also draws, now and then, integer constants collected from every local
(non-test) module loaded so far; which modules that is depends on test order and xdist
distribution, so a fixed seed alone is not enough (a mutant caught in one run was missed in
another). Checks therefore run with that pool empty (:func:`fixed_constants`).

The machines run without Hypothesis's shrink phase (like the suite's ``mutation`` profile):
Hypothesis re-validates the machines' per-step strategies on every replay, so shrinking costs
10-100 s per mutant. Instead the failing program (the runner log at the first violation) is
shrunk by :mod:`properties.core.shrink` (the suite's own program-level shrinker); the shrunk
program's length is the reported step count.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, Verbosity, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Invariant, Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.operations import Op
from properties.core.collector import machine_collector
from properties.core.determinism import fixed_constants
from properties.core.machine import OracleMachine
from properties.core.replay import run_program
from properties.core.selection import use
from properties.core.shrink import quiet, shrink_with_pools
from properties.core.targets import Target, load_target
from properties.families.v0 import hash_quality
from properties.families.v0.machines.block_level import BlockLevelMachine
from properties.families.v0.machines.evictor_level import EvictorLevelMachine
from properties.families.v0.machines.refcount_level import RefcountLevelMachine  # refcount level
from properties.families.v0.machines.sequence_level import SequenceLevelMachine
from tests.zoo.v0.broken import (
    BLOCK,
    EVICTOR,
    HASH_QUALITY,
    LONG_CHAIN,
    ONE_SHOT,
    REFCOUNT,
    SEQUENCE,
)

MACHINES: dict[str, type[OracleMachine]] = {
    BLOCK: BlockLevelMachine,
    SEQUENCE: SequenceLevelMachine,
    EVICTOR: EvictorLevelMachine,
    REFCOUNT: RefcountLevelMachine,  # refcount level
}
#: Past the ~1000-frame recursion limit (upstream fails at 2000 blocks, 32k tokens at 16).
LONG_CHAIN_BLOCKS = 2_000


@dataclass(frozen=True, slots=True)
class Budget:
    """A fixed search budget with its own seed: the same examples on every run (schedules
    with different seeds explore independently)."""

    max_examples: int
    steps: int
    seed: int = 0

    def settings(self) -> settings:
        return settings(
            max_examples=self.max_examples,
            stateful_step_count=self.steps,
            derandomize=False,
            database=None,
            deadline=None,
            report_multiple_bugs=False,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
        )


#: The schedules, the same for every mutant and for the bundled allocator (which must pass
#: all of them). Margin, measured when the budgets were set: every mutant is caught by each of
#: three independent seeds at this size.
BUDGETS = (Budget(max_examples=100, steps=40, seed=0), Budget(max_examples=100, steps=40, seed=1))


def plan(checks: tuple[str, ...], budgets: Sequence[Budget] = BUDGETS,
         ) -> list[tuple[str, Budget]]:
    """Every check under the first schedule, then the machines under the others (the
    long-chain program has no budget and runs once)."""
    return [(check, budget) for index, budget in enumerate(budgets) for check in checks
            if index == 0 or check not in ONE_SHOT]


@dataclass(frozen=True, slots=True)
class Catch:
    """A check that caught a target: the violation and program as found, and shrunk."""

    check: str
    found: Violation  # as raised by the check
    config: Config
    program: tuple[Op, ...]  # shrunk; replaying it raises ``violation``
    violation: Violation
    raw_steps: int  # runner log length at the first violation
    examples: int  # examples the check ran up to the first violation
    detect_seconds: float  # check start to the first violation
    check_seconds: float  # the whole check (detection plus Hypothesis's final replay)
    shrink_seconds: float

    @property
    def family(self) -> Invariant:
        return self.found.family

    @property
    def steps(self) -> int:
        """Length of the shrunk counterexample."""
        return len(self.program)


def long_chain(target: Target, blocks: int = LONG_CHAIN_BLOCKS) -> tuple[Config, list[Op]]:
    """One chain of ``blocks`` full blocks (block size 1), then a fork of its last block."""
    config = Config(1, blocks, 0, target.caps)
    chunks = tuple((i,) for i in range(blocks))
    return config, [ops.AllocateImmutableChain(None, chunks), ops.Fork(blocks - 1)]


def run_check(check: str, target: Target, budget: Budget) -> Catch | None:
    """Run one check against ``target``; the catch, or None if it passed. ``target`` stays
    selected afterwards (callers restore the previous one)."""
    started = time.perf_counter()
    if check == LONG_CHAIN:
        config, program = long_chain(target)
        try:
            with quiet():
                run_program(target, config, program)
        except Violation as violation:
            seconds = time.perf_counter() - started
            return _shrunk(check, target, violation, config, program, 1, seconds, seconds)
        return None
    if check == HASH_QUALITY:
        try:
            with quiet():
                hash_quality.check(target)
        except Violation as violation:
            seconds = time.perf_counter() - started
            shown = getattr(violation, "prefixcache_program", None)
            if shown is None:  # a narrow key without a collision: nothing to replay
                raise
            config, program = shown
            return _shrunk(check, target, violation, config, program, 1, seconds, seconds)
        return None
    first = _searcher().submit(_search, check, target.spec, target.allocator_type,
                               budget).result()
    if first is None:
        return None
    try:
        with quiet():
            run_program(target, first.config, first.program)
    except Violation as violation:
        return _shrunk(check, target, violation, first.config, first.program, first.examples,
                       first.seconds, time.perf_counter() - started)
    raise AssertionError(f"{target.spec}: the program that failed in the search passes on "
                         f"replay ({check}, {budget})")


def first_failure(check: str, target: Target, budget: Budget
                  ) -> tuple[Config, list[Op]] | None:
    """The machine ``check`` on ``target`` under ``budget``, in this process: the first
    failing program (config and operations), or None if it passed. No process isolation, so
    it is for targets that must pass (the false-alarm zoo), where state left by an earlier
    search could only hide a false alarm the other schedules still meet, never invent one;
    ``target`` stays selected afterwards."""
    found = _search(check, target.spec, target.allocator_type, budget)
    return None if found is None else (found.config, found.program)


def _searcher() -> ProcessPoolExecutor:
    """A fresh process per search, forked from a server that never ran one, so every search
    starts from the same state whatever ran before. This was added when a mutant caught on
    its own was missed after another check had run in the same process; the cause was the
    machines' config strategy, built once per process for the first target
    (:func:`properties.families.v0.strategies.configs_of` now builds it per example). The isolation
    stays:
    a mutant may also leave module state behind."""
    global _POOL
    if _POOL is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["tests.zoo.harness", "tests.zoo.v0.compiled"])
        _POOL = ProcessPoolExecutor(1, mp_context=context, max_tasks_per_child=1)
    return _POOL


_POOL: ProcessPoolExecutor | None = None


def _search(check: str, spec: str, allocator_type: str, budget: Budget) -> _FirstFailure | None:
    """The machine ``check`` on ``spec`` under ``budget``: its first failing program."""
    started = time.perf_counter()
    target = load_target(spec, allocator_type=allocator_type)
    found: list[_FirstFailure] = []
    examples = [0]

    class Probe(MACHINES[check]):  # type: ignore[valid-type,misc]
        """Counts examples and keeps the first failing program (nothing else changes)."""

        def __init__(self) -> None:
            super().__init__()
            examples[0] += 1

        def fail(self, violation: Violation) -> None:
            if not found:
                found.append(_FirstFailure(time.perf_counter() - started, examples[0],
                                           self.config, [s.op for s in self.runner.log]))
            super().fail(violation)

    use(target)
    try:
        with quiet(), fixed_constants(), machine_collector():
            run_state_machine_as_test(seed(budget.seed)(Probe), settings=budget.settings())
    except Violation:
        if not found:
            raise
        return found[0]
    return None


@dataclass(frozen=True, slots=True)
class _FirstFailure:
    seconds: float
    examples: int
    config: Config
    program: list[Op]


def _shrunk(check: str, target: Target, found: Violation, config: Config,
            program: Sequence[Op], examples: int, detect: float, total: float) -> Catch:
    started = time.perf_counter()
    config, shrunk, violation = shrink_with_pools(target, config, program, found)
    return Catch(check, found, config, tuple(shrunk), violation, len(program), examples, detect,
                 total, time.perf_counter() - started)
