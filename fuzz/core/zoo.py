"""Measurement, not CI: how long a fuzzer with a fixed seed takes to find each mutant of a
family's zoo (:class:`fuzz.core.tools.Zoo`; ``python -m fuzz zoo --seconds 60``).

For every mutant: the built-in engine, seeded, drives the family's Hypothesis machines
(:mod:`fuzz.core.machine_harness`, from seeded random inputs) and stops at the first violation
or after ``seconds``. Reported per mutant, as a Markdown table: found or not, seconds and
executions to the first failure, the invariant reported, whether the zoo lists that invariant
for the mutant, and the level that found it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from fuzz.core.engine import Engine
from fuzz.core.execution import Execution
from fuzz.core.machine_harness import MachineHarness, machine_level, machine_levels
from fuzz.core.tools import Zoo
from properties.core.family import Family
from properties.core.targets import load_target


def run_zoo(family: Family, *, seconds: float, seed: int, only: Sequence[str] | None = None,
            level: str | None = None) -> int:
    """Fuzz each mutant of ``family``'s zoo (``only``: those names) at machine ``level``
    (None: the machines the mutant names, its ``levels``, in turn, each with an equal share of
    ``seconds``; the family's first machine for a mutant that names none) and print the table;
    returns 0. A family without a zoo or machines, or an unknown level or mutant, is a
    ``ValueError`` naming the known ones."""
    if not isinstance(family, Zoo):
        raise ValueError(f"family {family.name!r} has no zoo")
    known = tuple(machine_levels(family))
    if not known:
        raise ValueError(f"family {family.name!r} has no machines")
    name = level or known[0]
    if name not in known:
        raise ValueError(f"unknown machine level {name!r} of family {family.name!r}; "
                         f"known: {', '.join(known)}")
    zoo = family.zoo()
    unknown = sorted(set(only or ()) - set(zoo))
    if unknown:
        raise ValueError(f"no zoo mutant {', '.join(unknown)} in family {family.name!r}")
    names = [n for n in zoo if not only or n in only]
    print("| mutant | found | seconds | executions | invariant | invariant expected | level |")
    print("|---|---|---|---|---|---|---|", flush=True)
    found = 0
    started = time.monotonic()
    for mutant_name in names:
        mutant = zoo[mutant_name]
        target = load_target(mutant.spec, family=family.name,
                             allocator_type=mutant.allocator_type)
        tried: tuple[str, ...] = (name,)
        if level is None:
            tried = tuple(n for n in mutant.levels if n in known) or tried
        spent, execs = 0.0, 0
        for tried_level in tried:
            machine = MachineHarness(machine_level(family, tried_level)).bind(target)
            engine: Engine[Execution] = Engine(machine.run, machine.seeds(seed), seed=seed)
            stats = engine.fuzz(seconds=seconds / len(tried), stop_on_failure=True)
            if stats.failures:
                first = stats.failures[0]
                violation = first.result.violation
                invariant = violation.family.value if violation is not None else "?"
                found += 1
                print(f"| {mutant_name} | yes | {spent + first.seconds:.2f} | "
                      f"{execs + first.execs} | {invariant} | "
                      f"{'yes' if invariant in mutant.invariants else 'NO'} | {tried_level} |",
                      flush=True)
                break
            spent += stats.seconds
            execs += stats.execs
        else:
            print(f"| {mutant_name} | no | >{seconds:.0f} | {execs} | | | "
                  f"{', '.join(tried)} |", flush=True)
    per_mutant = level is None and any(zoo[n].levels for n in names)
    where = "each mutant's machines" if per_mutant else name
    print(f"\n{found}/{len(names)} mutants of family {family.name} found by {where} "
          f"(seed {seed}, {seconds:.0f}s limit each) in "
          f"{time.monotonic() - started:.0f}s")
    return 0
