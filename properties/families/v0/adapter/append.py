"""Append plans: ``block.append_token_ids`` (model: ``models/families/v0/ops/append.py``)."""

from __future__ import annotations

from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan, block, tokens_lit


class AppendPlans(AdapterCore):
    """Plan of ``Append``."""

    def _plan_append(self, op: ops.Append, _: Any) -> Plan:
        return Plan([Stmt(method(block(op.block), "append_token_ids", tokens_lit(op.tokens)))])
