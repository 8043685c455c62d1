"""Free plans: ``alloc.free`` (model: ``models/families/v0/ops/free.py``)."""

from __future__ import annotations

from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan, block


class FreePlans(AdapterCore):
    """Plan of ``Free``."""

    def _plan_free(self, op: ops.Free, _: Any) -> Plan:
        return Plan([Stmt(method("alloc", "free", block(op.block)))])
