"""Replay a program (a JSON list of operations) against a target under the oracle.

``python -m properties.core.replay PROGRAM.json [--allocator SPEC] [--family NAME]
[--block-size N] [--gpu N] [--cpu N]`` prints each step and the first violation; exit
status 1 when one is found.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from models.core.invariants import Violation
from properties.core.family import Runner
from properties.core.targets import Target, load_target


def run_program(target: Target, config: Any, program: Sequence[Any]) -> Runner:
    """Execute ``program`` (operations of ``target``'s family) step by step, judging each
    step; raises the first ``Violation``."""
    family = target.family_object
    runner = family.runner(target, config)
    oracle = family.oracle(config)
    oracle.initial_check(runner.snapshot())
    for index, op in enumerate(program):
        outcome, snapshot = runner.execute(op)
        try:
            oracle.step(op, outcome, snapshot)
        except Violation as violation:
            raise violation.at(op, index) from None
    return runner


def replay_regression(config: Mapping[str, Any], program: Sequence[Mapping[str, Any]],
                      family: str | None = None) -> None:
    """The body of a regression test (``tests/regressions/``, written by ``python -m fuzz
    regress``): ``program`` (JSON operations of ``family``) replayed under the oracle against
    the session's target, or ``family``'s bundled target when the session's is another
    family's; raises the first ``Violation``, skips where the program is out of contract for
    the target."""
    import pytest

    from properties.core.selection import current_target

    target = current_target()
    if family is not None and target.family != family:
        target = load_target(family=family)
    fam = target.family_object
    try:
        run_program(target, fam.config(target, dict(config)),
                    [fam.op_from_json(dict(op)) for op in program])
    except fam.out_of_contract as why:
        pytest.skip(f"out of contract for {target.describe()}: {why}")


def check_program(spec: str, allocator_type: str, block_size: int, num_gpu: int, num_cpu: int,
                  program_json: str | list[dict[str, Any]],
                  tolerate: Sequence[str] = (), family: str | None = None) -> None:
    """Entry point used by generated reproducer scripts; ``tolerate``: upstream deviations
    the model follows (the family's ``tolerable``), those of the other xfails entries;
    ``family``: the target's family (None: detected)."""
    target = load_target(spec or None, family=family, allocator_type=allocator_type)
    fam = target.family_object
    data = json.loads(program_json) if isinstance(program_json, str) else program_json
    geometry = {"block_size": block_size, "num_gpu_blocks": num_gpu, "num_cpu_blocks": num_cpu}
    config = fam.config(target, geometry, frozenset(tolerate))
    run_program(target, config, [fam.op_from_json(d) for d in data])
    print("no violation: the program passes against", target.describe())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m properties.core.replay", description=__doc__)
    parser.add_argument("program", help="JSON file: a list of operations")
    parser.add_argument("--allocator", default=None, help="target spec module:callable")
    parser.add_argument("--family", default=None, help="the target's family (default: detected)")
    parser.add_argument("--allocator-type", default="prefix_caching")
    parser.add_argument("--block-size", type=int, default=4)
    parser.add_argument("--gpu", type=int, default=8)
    parser.add_argument("--cpu", type=int, default=4)
    args = parser.parse_args(argv)
    with open(args.program, encoding="utf-8") as fh:
        data = json.load(fh)
    try:
        check_program(args.allocator or "", args.allocator_type, args.block_size, args.gpu,
                      args.cpu, data, family=args.family)
    except Violation as violation:
        print(violation, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
