"""The v1 block-level state machine against the selected pool (``--allocator``, v1 family).

A violation an ``--xfails-file`` entry covers (the core's matching) is recorded as that entry's
hit, so the core reports the test as an expected failure naming it; any other leaves with its
replayable program and reproducer attached (the core reports it as a deviation). Robustness
findings of the misuse probes are printed in the terminal summary and never fail the run.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from properties.core.collector import machine_collector
from properties.core.determinism import fixed_constants
from properties.core.plugin import ExpectedFailure, note_worse, record
from properties.families.v1.machine import bind
from properties.families.v1.stepping import PROGRAM_ATTR
from properties.families.v1.targets import PoolTarget
from properties.families.v1.xfails import (
    attach,
    avoided,
    first_match,
    leaves,
    matching_entry,
    resolver,
)

__all__ = ["TestPoolLevel", "matching_entry"]


class TestPoolLevel:
    def test_block_pool(self, pool_target: PoolTarget, pool_xfails: list[ExpectedFailure],
                        pool_raw_xfails: list[dict[str, Any]]) -> None:
        """Known deviations' generator features are left out (``avoid``), so the rest is
        explored."""
        machine = bind(pool_target, avoid=avoided(pool_raw_xfails))
        with fixed_constants(), machine_collector():
            try:
                run_state_machine_as_test(machine, settings=settings())
            except (Violation, BaseExceptionGroup) as exc:
                found = list(leaves(exc))
                hits = [first_match(v, pool_xfails, pool_target, machine.config)
                        if isinstance(v, Violation) else None for v in found]
                if any(hit is None for hit in hits):
                    for v in found:
                        if isinstance(v, Violation):
                            note_worse(pool_xfails, v, getattr(v, PROGRAM_ATTR, None), None)
                            attach(v, pool_target, machine.config)
                    raise
                for v, hit in zip(found, hits, strict=True):
                    if hit is not None and isinstance(v, Violation):
                        resolve = resolver(v, pool_target, machine.config)
                        record(hit, v, None if resolve is None else resolve())
