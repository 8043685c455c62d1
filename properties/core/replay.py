"""Replay a program (a JSON list of operations) against a target under its family's judge.

``python -m properties.core.replay PROGRAM.json --config CONFIG.json [--allocator SPEC]
[--family NAME] [--allocator-type NAME]`` prints the first violation; exit status 1 when one is
found. ``CONFIG.json`` is the pool shape in the family's JSON form (an xfails entry's
``config``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from models.core.invariants import Violation
from properties.core.family import Judge
from properties.core.targets import Target, load_target


def run_program(target: Target, config: Any, program: Sequence[Any]) -> Judge:
    """Execute ``program`` (operations of ``target``'s family) step by step under a fresh
    judge; raises the first ``Violation`` (located at its step)."""
    judge = target.family_object.judge(target, config)
    for op in program:
        judge.step(op)
    return judge


def replay_regression(config: Mapping[str, Any], program: Sequence[Mapping[str, Any]],
                      family: str | None = None) -> None:
    """The body of a regression test (``tests/regressions/``, written by ``python -m fuzz
    regress``): ``program`` (JSON operations of ``family``) replayed under the judge against
    the session's target, or ``family``'s bundled target when the session's is another
    family's; raises the first ``Violation``, skips where the program is out of contract for
    the target."""
    import pytest

    from properties.core.selection import current_target

    target = current_target()
    if family is not None and target.family != family:
        target = load_target(family=family)
    fam = target.family_object
    vocabulary = fam.vocabulary
    try:
        run_program(target, vocabulary.config(target, dict(config)),
                    [vocabulary.op_from_json(dict(op)) for op in program])
    except fam.out_of_contract as why:
        pytest.skip(f"out of contract for {target.describe()}: {why}")


def check(spec: str, geometry: Mapping[str, Any], program_json: str | Sequence[Mapping[str, Any]],
          *, family: str | None = None, allocator_type: str | None = None,
          tolerate: Sequence[str] = ()) -> None:
    """Replay a program on ``spec`` (empty: the family's bundled target) shaped by
    ``geometry``, raising its first violation; ``tolerate``: upstream deviations the model
    follows (a family with :class:`~properties.core.roles.Tolerating`)."""
    from properties.core.selection import tolerating

    target = tolerating(load_target(spec or None, family=family, allocator_type=allocator_type),
                        frozenset(tolerate))
    vocabulary = target.family_object.vocabulary
    data = json.loads(program_json) if isinstance(program_json, str) else program_json
    run_program(target, vocabulary.config(target, geometry),
                [vocabulary.op_from_json(d) for d in data])
    print("no violation: the program passes against", target.describe())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m properties.core.replay", description=__doc__)
    parser.add_argument("program", help="JSON file: a list of operations")
    parser.add_argument("--config", required=True, help="JSON file: the pool shape")
    parser.add_argument("--allocator", default=None, help="target spec module:callable")
    parser.add_argument("--family", default=None, help="the target's family (default: detected)")
    parser.add_argument("--allocator-type", default=None,
                        help="the target's variant (default: the family's first)")
    args = parser.parse_args(argv)
    with open(args.program, encoding="utf-8") as fh:
        data = json.load(fh)
    with open(args.config, encoding="utf-8") as fh:
        geometry = json.load(fh)
    try:
        check(args.allocator or "", geometry, data, family=args.family,
              allocator_type=args.allocator_type)
    except Violation as violation:
        print(violation, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
