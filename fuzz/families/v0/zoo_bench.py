"""Measurement, not CI: how long a harness with a fixed seed takes to find each zoo mutant
(``python -m fuzz zoo --seconds 60``).

For every mutant of ``tests.zoo.v0.broken.ZOO``: the built-in engine, seeded, starting from the
harness's seed corpus, stops at the first violation or after ``seconds``. Reported per mutant:
found or not, seconds and executions to the first failure, the family reported, and whether
that family is one the zoo lists for the mutant. ``route="machine"`` fuzzes the Hypothesis
machine of the same level instead of the decoder (:mod:`fuzz.core.machine_harness`), from
seeded random inputs.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

from fuzz.cli import corpus_dir, dict_path, read_corpus, read_dict
from fuzz.core.engine import Engine
from fuzz.core.harness import Harness
from fuzz.core.machine_harness import MachineHarness, machine_level
from fuzz.families.v0.decoder import Level
from properties.core import family as families
from properties.core.targets import load_target


def _zoo() -> dict[str, Any]:
    module = importlib.import_module("tests.zoo.v0.broken")
    zoo: dict[str, Any] = module.ZOO
    return zoo


def run_zoo(*, seconds: float, seed: int, only: list[str] | None, harness: str,
            route: str = "decoder") -> int:
    zoo = _zoo()
    names = [n for n in zoo if not only or n in only]
    level = Level(harness)
    seeds = read_corpus(corpus_dir(level.value))
    words = read_dict(dict_path(level.value))
    print("| mutant | found | seconds | executions | family | family expected |")
    print("|---|---|---|---|---|---|", flush=True)
    found = 0
    started = time.monotonic()
    for name in names:
        mutant = zoo[name]
        h: Harness | MachineHarness
        if route == "machine":
            h = MachineHarness(machine_level(families.by_name("v0"), level.value))
            h.bind(load_target(mutant.spec))
            engine = Engine(h.run, h.seeds(seed), seed=seed)
        else:
            h = Harness(level).bind(load_target(mutant.spec))
            engine = Engine(h.run, seeds, seed=seed, dictionary=words)
        stats = engine.fuzz(seconds=seconds, stop_on_failure=True)
        if stats.failures:
            f = stats.failures[0]
            family = f.result.violation.family if f.result.violation is not None else None
            expected = family in mutant.families
            found += 1
            print(f"| {name} | yes | {f.seconds:.2f} | {f.execs} | "
                  f"{family.value if family else '?'} | {'yes' if expected else 'NO'} |",
                  flush=True)
        else:
            print(f"| {name} | no | >{seconds:.0f} | {stats.execs} | | |", flush=True)
    print(f"\n{found}/{len(names)} mutants found by {level.value}, {route} route (seed {seed}, "
          f"{seconds:.0f}s limit each) in {time.monotonic() - started:.0f}s")
    return 0
