"""Allocation plans: ``allocate_mutable_block``, ``allocate_immutable_block``,
``allocate_immutable_blocks`` (model: ``models/families/v0/ops/allocate.py``).
"""

from __future__ import annotations

from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Lit, Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan, maybe_block, tokens_lit


class AllocatePlans(AdapterCore):
    """Plans of the three allocation calls; each creates block handles."""

    def _plan_allocate_mutable(self, op: ops.AllocateMutable, _: Any) -> Plan:
        call = method("alloc", "allocate_mutable_block", maybe_block(op.prev),
                      device=self.device(op.device), **self._extra(op.extra_hash))
        return Plan([Stmt(call)], creates=1, single=True)

    def _plan_allocate_immutable(self, op: ops.AllocateImmutable, _: Any) -> Plan:
        call = method("alloc", "allocate_immutable_block", maybe_block(op.prev),
                      tokens_lit(op.tokens), device=self.device(op.device),
                      **self._extra(op.extra_hash))
        return Plan([Stmt(call)], creates=1, single=True)

    def _plan_allocate_immutable_chain(self, op: ops.AllocateImmutableChain, _: Any) -> Plan:
        chunks = Lit([list(c) for c in op.chunks])
        call = method("alloc", "allocate_immutable_blocks", maybe_block(op.prev), chunks,
                      device=self.device(op.device), **self._extra(op.extra_hash))
        return Plan([Stmt(call)], creates=len(op.chunks))
