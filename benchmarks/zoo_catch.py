"""Time for the suite to catch each broken allocator of the self-test zoo (``tests.zoo``).

Each mutant runs through the checks its registry entry names under the zoo's own schedules
(``tests.zoo.harness``: the same seeded budgets ``tests/test_zoo.py`` asserts, each search in a
fresh process, the failing program shrunk by replay) until one reports a violation. Reported:
which check and seed caught it, the family, whether the zoo lists that family for the mutant,
the example that failed, the seconds to the first violation and for the whole mutant (earlier
checks, the catching search, and shrinking), and the shrunk counterexample's length. A mutant
that survives every check is reported as missed, never silently dropped.

Times are wall seconds of the search process (one search at a time; the machine's other core
is free for it).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from properties.core.targets import load_target

__all__ = ["ZOO_MODULE", "Catch", "ZooMissing", "catch_all", "catch_one", "load_zoo"]

ZOO_MODULE = "tests.zoo.v0.broken"
HARNESS_MODULE = "tests.zoo.harness"


class ZooMissing(ImportError):
    """The zoo registry or its harness cannot be imported (not written yet, or broken)."""


@dataclass(frozen=True, slots=True)
class Catch:
    """How (and whether) one mutant was caught."""

    name: str
    bug: str
    caught_by: str | None  # "<check> seed <n>"
    family: str | None
    expected_family: bool
    detect_s: float | None  # catching search: its start to the first violation
    total_s: float  # every check run for this mutant, shrinking included
    note: str = ""
    examples: int | None = None  # which example of the catching search failed first
    steps: int | None = None  # length of the shrunk counterexample

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bug": self.bug, "caught_by": self.caught_by,
                "family": self.family, "expected_family": self.expected_family,
                "examples": self.examples, "detect_s": self.detect_s,
                "total_s": self.total_s, "steps": self.steps, "note": self.note}


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # a zoo half written raises anything at import
        raise ZooMissing(f"cannot import {name}: {type(exc).__name__}: {exc}") from exc


def load_zoo() -> Mapping[str, Any]:
    """``ZOO`` of :data:`ZOO_MODULE` (name -> mutant entry)."""
    zoo = getattr(_import(ZOO_MODULE), "ZOO", None)
    if not isinstance(zoo, Mapping) or not zoo:
        raise ZooMissing(f"{ZOO_MODULE} has no non-empty ZOO mapping")
    return zoo


def schedules(max_examples: int | None, steps: int) -> tuple[Any, ...]:
    """The zoo's own schedules (``max_examples`` None), or the same seeds at a smaller
    budget."""
    harness = _import(HARNESS_MODULE)
    if max_examples is None:
        return tuple(harness.BUDGETS)
    return tuple(harness.Budget(max_examples, steps, b.seed) for b in harness.BUDGETS)


def catch_one(name: str, mutant: Any, budgets: Sequence[Any]) -> Catch:
    """Run ``mutant``'s checks in the zoo's order (every check under the first schedule,
    then the machines under the next) until one catches it."""
    harness = _import(HARNESS_MODULE)
    start = time.perf_counter()
    try:
        target = load_target(mutant.spec)
    except Exception as exc:
        return Catch(name, mutant.bug, None, None, False, None, time.perf_counter() - start,
                     f"cannot load {mutant.spec}: {exc}")
    expected = {family.value for family in mutant.families}
    for check, budget in harness.plan(tuple(mutant.checks), budgets):
        caught = harness.run_check(check, target, budget)
        if caught is None:
            continue
        family = caught.family.value
        return Catch(name, mutant.bug, f"{check} seed {budget.seed}", family,
                     family in expected, caught.detect_seconds, time.perf_counter() - start,
                     examples=caught.examples, steps=caught.steps)
    return Catch(name, mutant.bug, None, None, False, None, time.perf_counter() - start,
                 f"not caught by {', '.join(mutant.checks)} under {len(budgets)} schedules")


def catch_all(zoo: Mapping[str, Any], budgets: Sequence[Any],
              only: Sequence[str] | None = None, budget_s: float | None = None,
              ) -> list[Catch]:
    """Every mutant (or those in ``only``); once ``budget_s`` seconds are spent the remaining
    mutants are listed as skipped."""
    start = time.perf_counter()
    out: list[Catch] = []
    for name in [n for n in zoo if only is None or n in only]:
        mutant = zoo[name]
        if budget_s is not None and time.perf_counter() - start > budget_s:
            out.append(Catch(name, mutant.bug, None, None, False, None, 0.0,
                             f"skipped: the section's {budget_s:.0f} s budget is spent"))
            continue
        out.append(catch_one(name, mutant, budgets))
    return out
