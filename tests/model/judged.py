"""Programs run against a target under the oracle, for the model tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from models.families.v0.capabilities import Config
from models.families.v0.operations import ErrorKind, Op
from models.families.v0.oracle import Oracle
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0.runner import Runner


def run_judged(program: Sequence[Op], spec: str = DEFAULT_SPEC,
               shape: tuple[int, int, int] = (1, 3, 2), allocator_type: str = "prefix_caching",
               tamper: object = None) -> tuple[list[tuple[ErrorKind | None, Any]], Oracle]:
    """Run ``program`` under the oracle (block size, GPU and CPU blocks from ``shape``); the
    (error, value) of every step and the oracle after the last (a violation raises). With
    ``tamper``, the last step's value is replaced before it is judged."""
    target = load_target(spec, allocator_type=allocator_type)
    config = Config(*shape, target.caps)
    runner, oracle = Runner(target, config), Oracle(config)
    oracle.initial_check(runner.snapshot())
    out: list[tuple[ErrorKind | None, Any]] = []
    for i, op in enumerate(program):
        outcome, snapshot = runner.execute(op)
        if tamper is not None and i == len(program) - 1:
            outcome = replace(outcome, value=tamper)
        out.append((outcome.error, outcome.value))
        oracle.step(op, outcome, snapshot)
    return out, oracle
