"""Every entry of ``--pool-xfails-file`` still reproduces on the selected pool.

Each entry's program is replayed with its config (no Hypothesis) and must raise a violation
of the entry's family at one of its operations; an entry that stops reproducing fails here,
so a fixed upstream bug is noticed and its entry removed.
"""

from __future__ import annotations

from typing import Any

import pytest

from models.core.invariants import Violation
from models.families.v1 import ops
from models.families.v1.pool_model import PoolConfig
from properties.families.v1.executor import run_program
from properties.families.v1.targets import PoolTarget
from properties.families.v1.test_pool_level import matching_entry


def config_of(entry: dict[str, Any]) -> PoolConfig:
    c = dict(entry["config"])
    c["group_block_sizes"] = tuple(c["group_block_sizes"])
    return PoolConfig(**c)


def test_each_expected_failure_reproduces(pool_target: PoolTarget,
                                          pool_xfails: list[dict[str, Any]]) -> None:
    if not pool_xfails:
        pytest.skip("no --pool-xfails-file entries for this target")
    for entry in pool_xfails:
        program = [ops.from_json(r) for r in entry["program"]]
        with pytest.raises(Violation) as info:
            run_program(pool_target, config_of(entry), program)
        assert matching_entry(info.value, [entry]) is entry, (entry["id"], str(info.value))
