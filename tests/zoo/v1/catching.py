"""Running the v1 block-level machine on one broken pool until it fails: shared by the zoo of
upstream's pool (``tests/v1/test_zoo.py``) and of the bundled pool
(``tests/v1/test_bundled_zoo.py``)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from models.families.v1 import ops
from properties.core.collector import machine_collector
from properties.core.determinism import fixed_constants
from properties.families.v1.machine import FINDINGS, PoolMachine


def catch(machine: type[PoolMachine], budget: settings,
          target_name: str) -> tuple[Violation, list[ops.Op], float]:
    """Run ``machine`` under ``budget`` until it raises a :class:`Violation` (a
    ``pytest.fail`` if it does not): the violation, the program of the failing example (every
    operation that reached the pool, the failing one last; empty when the fresh pool failed)
    and the seconds it took. The misuse findings of ``target_name`` are dropped (a zoo's findings
    are its patches', not news about the target)."""
    made: list[PoolMachine] = []
    original = machine.__init__

    def init(self: Any) -> None:
        original(self)
        made.append(self)

    machine.__init__ = init  # type: ignore[method-assign]
    start = time.perf_counter()
    # fixed constants: no order dependence
    with pytest.raises(Violation) as info, fixed_constants(), machine_collector():
        run_state_machine_as_test(machine, settings=budget)
    elapsed = time.perf_counter() - start
    for key in [k for k in FINDINGS if k[0].startswith(target_name)]:
        del FINDINGS[key]
    judge = getattr(made[-1], "judge", None)
    return info.value, [] if judge is None else [step.op for step in judge.log], elapsed
