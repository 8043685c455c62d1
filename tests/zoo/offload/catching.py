"""Running the offload machine on one target until it fails, and the zoo's measurements.

``python -m tests.zoo.offload.catching`` runs every mutant under :data:`BUDGET` and prints, per
mutant, the invariant caught, the seconds to the failure (shrinking included) and the length
of the shrunk program, then the median and maximum time and length.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from properties.core import selection
from properties.core.baseline import found_of
from properties.core.collector import machine_collector
from properties.core.determinism import fixed_constants
from properties.core.targets import Target, load_target
from properties.families.offload.family import REF
from properties.families.offload.machines.test_offload import OffloadMachine
from tests.zoo.offload.mutants import BY_NAME, MUTANTS

#: The zoo's fixed budget: derandomized, so each mutant is met by the same examples each run.
#: Hypothesis's own shrinking is off: the core shrinks the failing program operation by
#: operation when it renders the reproducer (``properties.core.shrink``), which is what the
#: measured length is.
BUDGET = settings(max_examples=600, stateful_step_count=50, derandomize=True, deadline=None,
                  database=None, report_multiple_bugs=False,
                  phases=(Phase.explicit, Phase.generate),
                  suppress_health_check=list(HealthCheck))


@dataclass(frozen=True)
class Caught:
    """What catching one mutant took."""

    violation: Violation
    seconds: float
    steps: int  # the shrunk program's length


def run(target: Target, budget: settings = BUDGET) -> None:
    """The offload machine against ``target`` under ``budget`` (raises its violation)."""
    with selection.kept(), fixed_constants(), machine_collector():
        selection.use(target)
        run_state_machine_as_test(OffloadMachine, settings=budget)


def mutant_target(name: str) -> Target:
    return load_target(f"tests.zoo.offload.mutants:{name}", family=REF,
                       allocator_type=BY_NAME[name].policy)


def catch(name: str, budget: settings = BUDGET) -> Caught:
    """Run the machine on mutant ``name`` until it fails (``pytest.fail`` if it does not)."""
    target = mutant_target(name)
    start = time.perf_counter()
    try:
        run(target, budget)
    except Violation as violation:
        elapsed = time.perf_counter() - start
        found = found_of(violation)
        steps = len(found.program) if found is not None else -1
        return Caught(violation, elapsed, steps)
    pytest.fail(f"zoo mutant {name!r} ({BY_NAME[name].bug}) escaped the budget")


def main() -> int:
    rows = []
    escaped = []
    for mutant in MUTANTS:
        try:
            caught = catch(mutant.name)
        except pytest.fail.Exception:
            escaped.append(mutant.name)
            print(f"{mutant.name:32} {mutant.policy:4} ESCAPED")
            continue
        ok = caught.violation.family in mutant.families
        rows.append((mutant.name, caught.violation.family.value, ok, caught.seconds,
                     caught.steps))
        print(f"{mutant.name:32} {mutant.policy:4} {caught.violation.family.value:8} "
              f"{'ok' if ok else 'UNEXPECTED'} {caught.seconds:6.2f} s {caught.steps:3} steps")
    times = [r[3] for r in rows]
    lengths = [r[4] for r in rows]
    print(f"{len(MUTANTS)} mutants, {sum(r[2] for r in rows)} caught with their invariant; time "
          f"median {statistics.median(times):.2f} s max {max(times):.2f} s; shrunk length "
          f"median {statistics.median(lengths)} max {max(lengths)}")
    if escaped:
        print(f"escaped: {', '.join(escaped)}")
    return 0 if all(r[2] for r in rows) and not escaped else 1


if __name__ == "__main__":
    sys.exit(main())
