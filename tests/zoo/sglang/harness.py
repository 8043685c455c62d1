"""The sglang family's machine run on one target in this process, under a fixed budget: the
first failing program, shrunk by the core's program shrinker, with how long the search took.

The budget is the suite's ``ci`` profile size with a fixed seed (derandomized per seed), and
Hypothesis's own shrink phase off: the failing program is shrunk by
:func:`properties.core.shrink.shrink_with_pools` instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from models.families.sglang.ops import TreeConfig
from properties.core.collector import machine_collector
from properties.core.determinism import fixed_constants
from properties.core.machine import OracleMachine
from properties.core.selection import kept, use
from properties.core.shrink import shrink_with_pools
from properties.core.targets import Target, load_target
from properties.families.sglang.family import REF
from properties.families.sglang.machines.test_sglang import TreeMachine


@dataclass(frozen=True, slots=True)
class Budget:
    max_examples: int = 200
    steps: int = 50
    seed: int = 0

    def settings(self) -> settings:
        return settings(max_examples=self.max_examples, stateful_step_count=self.steps,
                        derandomize=False, database=None, deadline=None,
                        report_multiple_bugs=False,
                        phases=[Phase.explicit, Phase.reuse, Phase.generate],
                        suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)


@dataclass(frozen=True, slots=True)
class Catch:
    """What caught a target: the first violation, its program shrunk, and the costs."""

    found: Violation
    violation: Violation  # of the shrunk program
    config: TreeConfig
    program: tuple[Any, ...]
    raw_steps: int
    examples: int
    detect_seconds: float
    shrink_seconds: float


def target_of(spec: str) -> Target:
    return load_target(spec, family=REF)


def first_failure(target: Target, budget: Budget, machine: type[OracleMachine] = TreeMachine
                  ) -> tuple[TreeConfig, list[Any], int, float] | None:
    """The machine on ``target``: (config, program, examples, seconds) of the first failing
    example, or None when the whole budget passes."""
    started = time.perf_counter()
    found: list[tuple[TreeConfig, list[Any], int, float]] = []
    examples = [0]

    class Probe(machine):  # type: ignore[valid-type,misc]
        def __init__(self) -> None:
            super().__init__()
            examples[0] += 1

        def fail(self, violation: Violation, log: Any = None) -> Any:
            if not found:
                steps = [s.op for s in (self.judge.log if log is None else log)]
                found.append((self.config, steps, examples[0],
                              time.perf_counter() - started))
            raise violation

    with kept():
        use(target)
        try:
            with fixed_constants(), machine_collector():
                run_state_machine_as_test(seed(budget.seed)(Probe), settings=budget.settings())
        except Violation:
            if not found:
                raise
    return found[0] if found else None


def catch(target: Target, budget: Budget = Budget(),
          machine: type[OracleMachine] = TreeMachine) -> Catch | None:
    """:func:`first_failure`, then the program shrunk (the catch), or None."""
    first = first_failure(target, budget, machine)
    if first is None:
        return None
    config, program, examples, seconds = first
    try:
        judge = target.family_object.judge(target, config)
        for op in program:
            judge.step(op)
    except Violation as violation:
        started = time.perf_counter()
        config, shrunk, shown = shrink_with_pools(target, config, program, violation)
        return Catch(violation, shown, config, tuple(shrunk), len(program), examples, seconds,
                     time.perf_counter() - started)
    raise AssertionError(f"{target.spec}: the failing program passes on replay")


#: The schedule every mutant is searched with (the bundled reference must pass all of it):
#: seeds in turn, a mutant is caught by the first that fails it.
SCHEDULE = tuple(Budget(seed=s) for s in range(4))


def caught(target: Target, schedule: tuple[Budget, ...] = SCHEDULE,
           machine: type[OracleMachine] = TreeMachine) -> tuple[Catch, float] | None:
    """The first catch of ``schedule`` and the seconds from the schedule's start to it."""
    started = time.perf_counter()
    for budget in schedule:
        found = catch(target, budget, machine)
        if found is not None:
            return found, time.perf_counter() - started - found.shrink_seconds
    return None


def measure() -> list[tuple[str, str, str, float, int, int]]:
    """(mutant, invariant caught, ok?, seconds to catch, raw steps, shrunk steps) for every
    mutant of :mod:`tests.zoo.sglang.mutants`."""
    from tests.zoo.sglang.mutants import MUTANTS

    rows = []
    for name, mutant in MUTANTS.items():
        got = caught(target_of(f"tests.zoo.sglang.mutants:{name}"))
        if got is None:
            rows.append((name, "escaped", "no", float("nan"), 0, 0))
            continue
        found, seconds = got
        family = found.found.family.value
        rows.append((name, family, "ok" if family in mutant.caught_by else "no", seconds,
                     found.raw_steps, len(found.program)))
    return rows


def main() -> None:
    """``python -m tests.zoo.sglang.harness``: the table, then median and max."""
    import statistics

    rows = measure()
    for row in rows:
        print(f"{row[0]:32s} {row[1]:9s} {row[2]:3s} {row[3]:6.2f}s raw {row[4]:3d} "
              f"shrunk {row[5]:3d}")
    done = [r for r in rows if r[2] == "ok"]
    seconds, shrunk = [r[3] for r in done], [r[5] for r in done]
    print(f"{len(done)}/{len(rows)} caught with their invariant; time to catch median "
          f"{statistics.median(seconds):.2f}s max {max(seconds):.2f}s; shrunk program "
          f"median {statistics.median(shrunk)} max {max(shrunk)} steps")


if __name__ == "__main__":
    main()
