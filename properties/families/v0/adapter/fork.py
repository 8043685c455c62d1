"""Fork plans: ``alloc.fork`` (model: ``models/families/v0/ops/fork.py``)."""

from __future__ import annotations

from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan, block


class ForkPlans(AdapterCore):
    """Plan of ``Fork``: the returned list's blocks become handles."""

    def _plan_fork(self, op: ops.Fork, _: Any) -> Plan:
        return Plan([Stmt(method("alloc", "fork", block(op.block)))], creates=-1)
