"""Time for the suite to catch each broken allocator of the self-test zoo (``tests.zoo``).

Each mutant is run through the checks its registry entry names (the block- and sequence-level
state machines, derandomized and without shrinking, so the time is time-to-detection; or a
long-chain program for bugs tiny pools cannot show) until one reports a violation. Reported:
which check caught it, the family, whether that family is one the zoo expects, and the CPU
seconds to the first violation and to the end of the run. A mutant that survives every check
within its budget is reported as missed, never silently dropped.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis.stateful import run_state_machine_as_test

from benchmarks.compiled import CLOCK
from benchmarks.suite_speed import (
    MACHINES,
    Probe,
    instrumented,
    machine_settings,
    quiet,
    selected,
)
from models import operations as ops
from models.capabilities import Config
from models.families import Violation
from properties.replay import run_program
from properties.targets import Target, load_target

__all__ = ["ZOO_MODULE", "Catch", "ZooMissing", "catch_all", "catch_one", "load_zoo"]

ZOO_MODULE = "tests.zoo.broken"
LONG_CHAIN = "long_chain"
LONG_CHAIN_BLOCKS = 1_200  # past the ~1000-frame recursion limit of recursive chain walks


def _now() -> float:
    """CPU seconds of this thread (other processes on the machine do not count)."""
    return CLOCK() / 1e9


class ZooMissing(ImportError):
    """The zoo registry cannot be imported (not written yet, or broken)."""


@dataclass(frozen=True, slots=True)
class Catch:
    """How (and whether) one mutant was caught."""

    name: str
    bug: str
    caught_by: str | None
    family: str | None
    expected_family: bool
    detect_s: float | None  # to the first violation
    total_s: float  # every check run for this mutant, to its end
    note: str = ""
    examples: int | None = None  # which example of the catching check failed first

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bug": self.bug, "caught_by": self.caught_by,
                "family": self.family, "expected_family": self.expected_family,
                "examples": self.examples, "detect_s": self.detect_s,
                "total_s": self.total_s, "note": self.note}


def load_zoo() -> Mapping[str, Any]:
    """``ZOO`` of :data:`ZOO_MODULE` (name -> mutant entry)."""
    try:
        module = importlib.import_module(ZOO_MODULE)
    except Exception as exc:  # a zoo half written raises anything at import
        raise ZooMissing(f"cannot import {ZOO_MODULE}: {type(exc).__name__}: {exc}") from exc
    zoo = getattr(module, "ZOO", None)
    if not isinstance(zoo, Mapping) or not zoo:
        raise ZooMissing(f"{ZOO_MODULE} has no non-empty ZOO mapping")
    return zoo


def _long_chain(target: Target) -> None:
    """Fork the end of a chain longer than a recursive walk survives; raises the violation."""
    config = Config(1, LONG_CHAIN_BLOCKS + 1, 0, target.caps)
    chain = tuple((i,) for i in range(LONG_CHAIN_BLOCKS))
    run_program(target, config, [ops.AllocateImmutableChain(None, chain),
                                 ops.Fork(LONG_CHAIN_BLOCKS - 1)])


def _run_check(check: str, target: Target, max_examples: int,
               steps: int) -> tuple[BaseException | None, float | None, int | None]:
    """Run one check; returns what it raised, the clock time of the first violation and the
    number of the example that raised it."""
    if check == LONG_CHAIN:
        try:
            _long_chain(target)
        except Exception as exc:
            return exc, _now(), 1
        return None, None, None
    first: list[float] = []
    at_example: list[int] = []
    probe = Probe()
    cls = instrumented(MACHINES[check], probe)

    class FirstViolation(cls):  # type: ignore[valid-type,misc]
        def setup(self, config: Config) -> None:
            super().setup(config)
            step = self.oracle.step

            def judged(*args: Any, **kwargs: Any) -> None:
                try:
                    step(*args, **kwargs)
                except Violation:
                    if not first:
                        first.append(_now())
                        at_example.append(probe.examples)
                    raise

            self.oracle.step = judged

    with selected(target):
        try:
            run_state_machine_as_test(FirstViolation,
                                      settings=machine_settings(max_examples, steps))
        except Exception as exc:
            return exc, first[0] if first else None, at_example[0] if at_example else None
    return None, None, None


def _family_of(exc: BaseException) -> str | None:
    if isinstance(exc, Violation):
        return exc.family.value
    for inner in getattr(exc, "exceptions", ()):  # an ExceptionGroup of several failures
        family = _family_of(inner)
        if family is not None:
            return family
    return None


def catch_one(name: str, mutant: Any, max_examples: int, steps: int) -> Catch:
    """Run ``mutant``'s checks in order until one catches it. The budget is counted in
    examples, not seconds, so every run sees the same examples (a wall-clock cut would make
    Hypothesis's replays inconsistent)."""
    bug = str(getattr(mutant, "bug", ""))
    expected = {getattr(f, "value", str(f)) for f in getattr(mutant, "families", ())}
    checks: Sequence[str] = tuple(getattr(mutant, "checks", ("block", "sequence")))
    spec = getattr(mutant, "spec", f"{ZOO_MODULE}:{name}")
    start = _now()
    try:
        target = load_target(spec)
    except Exception as exc:
        return Catch(name, bug, None, None, False, None, _now() - start,
                     f"cannot load {spec}: {exc}")
    notes: list[str] = []
    for check in checks:
        if check not in MACHINES and check != LONG_CHAIN:
            notes.append(f"unknown check {check!r} skipped")
            continue
        began = _now()
        with quiet():
            raised, first, example = _run_check(check, target, max_examples, steps)
        if raised is None:
            spent = _now() - began
            notes.append(f"{check}: not caught in {max_examples} examples ({spent:.0f} s)")
            continue
        family = _family_of(raised)
        if family is None:
            notes.append(f"{check}: {type(raised).__name__}: {str(raised)[:120]}")
            continue
        detect = (first if first is not None else _now()) - start
        return Catch(name, bug, check, family, family in expected, detect,
                     _now() - start, "; ".join(notes), example)
    return Catch(name, bug, None, None, False, None, _now() - start,
                 "; ".join(notes) or "no check ran")


def catch_all(zoo: Mapping[str, Any], max_examples: int, steps: int,
              only: Sequence[str] | None = None, budget_s: float | None = None,
              ) -> list[Catch]:
    """Every mutant (or those in ``only``); once ``budget_s`` CPU seconds are spent the
    remaining mutants are listed as skipped."""
    start = _now()
    out: list[Catch] = []
    for name in [n for n in zoo if only is None or n in only]:
        mutant = zoo[name]
        if budget_s is not None and _now() - start > budget_s:
            out.append(Catch(name, str(getattr(mutant, "bug", "")), None, None, False, None,
                             0.0, f"skipped: the section's {budget_s:.0f} s budget is spent"))
            continue
        out.append(catch_one(name, mutant, max_examples, steps))
    return out
