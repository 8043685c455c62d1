"""Every entry of the manager xfails file still reproduces on the selected manager.

Each entry's program is replayed with its config (no Hypothesis) and must raise a violation of
the entry's family at one of its operations, so a fixed upstream bug is noticed and its entry
removed; its plain script under ``conformance/`` must exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from models.core.invariants import Violation
from models.families.v1 import request_ops as ops
from properties.families.v1.request.executor import run_program
from properties.families.v1.request.plugin import CONFORMANCE_DIR
from properties.families.v1.request.target import ManagerConfig, ManagerTarget
from properties.families.v1.test_pool_level import matching_entry


def test_each_manager_expected_failure_reproduces(manager_target: ManagerTarget,
                                                  manager_xfails: list[dict[str, Any]]) -> None:
    if not manager_xfails:
        pytest.skip("no manager xfails entries for this target")
    for entry in manager_xfails:
        program = [ops.from_json(r) for r in entry["program"]]
        with pytest.raises(Violation) as info:
            run_program(manager_target, ManagerConfig.from_json(entry["config"]), program)
        assert matching_entry(info.value, [entry]) is entry, (entry["id"], str(info.value))
        minor = ".".join(manager_target.version.split(".")[:2])
        script = CONFORMANCE_DIR / f"vllm-{minor}" / f"{entry['id']}.py"
        assert Path(script).is_file(), f"{entry['id']}: no reproducer script {script}"
