"""Mark plans: ``mark_blocks_as_accessed``, ``mark_blocks_as_computed``, and
``MarkStaleIds``, which passes the ids freed handles held as literals (``freed_ids``, recorded by
the runner at each free) (model: ``models/families/v0/ops/marks.py``).
"""

from __future__ import annotations

from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Attr, Expr, ListOf, Lit, Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan, block


class MarkPlans(AdapterCore):
    """Plans of the three marks."""

    def _plan_mark_accessed(self, op: ops.MarkAccessed, _: Any) -> Plan:
        call = method("alloc", "mark_blocks_as_accessed", self._ids(op.blocks), Lit(op.now))
        return Plan([Stmt(call)])

    def _plan_mark_computed(self, op: ops.MarkComputed, _: Any) -> Plan:
        return Plan([Stmt(method("alloc", "mark_blocks_as_computed", self._ids(op.blocks)))])

    def _plan_mark_stale_ids(self, op: ops.MarkStaleIds, _: Any) -> Plan:
        ids: list[Expr] = []
        for h in op.blocks:
            freed = self.freed_ids.get(h)
            ids.append(Attr(block(h), "block_id") if freed is None else Lit(freed))
        call = method("alloc", "mark_blocks_as_accessed", ListOf(tuple(ids)), Lit(op.now))
        stale = any(h in self.freed_ids for h in op.blocks)
        return Plan([Stmt(call, comment="literal ids: held by freed blocks" if stale else "")])
