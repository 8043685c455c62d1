"""Null-block plans: ``allocate_or_get_null_block``, its surface read back (type-checked
like the rest) and its misuse (model: ``models/families/v0/ops/null_block.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.families.v0 import operations as ops
from models.families.v0.operations import Dev
from properties.core.calls import Attr, Call, Expr, Lit, Name, Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan
from properties.families.v0.adapter.values import (
    Unsupported,
    checked_block,
    checked_bool,
    checked_int,
    checked_ints,
    checked_number,
    checked_opt_int,
)


class NullBlockPlans(AdapterCore):
    """Plans of the null block's operations; the block is bound to ``null_block``."""

    def _plan_null_block(self, op: ops.GetNullBlock, _: Any) -> Plan:
        stmt = Stmt(method("alloc", "allocate_or_get_null_block"), bind="null_block")
        return Plan([stmt], value=lambda r: checked_int(
            checked_block(r[-1], "alloc.allocate_or_get_null_block").block_id,
            "allocate_or_get_null_block().block_id"))

    _NULL_READS: tuple[tuple[str, Callable[[Any, str], Any]], ...] = (
        ("block_id", checked_int), ("token_ids", checked_ints),
        ("num_empty_slots", checked_int), ("is_full", checked_bool),
        ("prev_block", lambda v, _: v is None), ("content_hash", checked_opt_int))

    def _null_stmt(self) -> Stmt:
        return Stmt(method("alloc", "allocate_or_get_null_block"), bind="null_block")

    def _plan_null_block_query(self, op: ops.NullBlockQuery, _: Any) -> Plan:
        null = Name("null_block")
        reads = list(self._NULL_READS)
        if self.has_extra_hash:
            reads.append(("extra_hash", checked_opt_int))
        stmts = [self._null_stmt(), *(Stmt(Attr(null, name)) for name, _r in reads)]
        if op.stamp is not None:
            reads += [("computed", checked_bool), ("last_accessed", checked_number)]
            stmts += [Stmt(Call(Name("setattr"), (null, Lit("last_accessed"), Lit(op.stamp)))),
                      Stmt(Call(Name("setattr"), (null, Lit("computed"), Lit(False)))),
                      Stmt(Attr(null, "computed")), Stmt(Attr(null, "last_accessed"))]
        first_read = 1
        stamped = op.stamp is not None

        def value(r: list[Any]) -> dict[str, Any]:
            got = r[first_read:first_read + len(reads) - 2 * stamped]
            if stamped:
                got += r[-3:-1]  # computed, last_accessed (the setattrs return None)
            out: dict[str, Any] = {}
            for (name, check), raw in zip(reads, got, strict=True):
                out["no_prev_block" if name == "prev_block" else name] = check(
                    raw, f"allocate_or_get_null_block().{name}")
            return out

        stmts.append(Stmt(method("alloc", "free", null), comment="ignored for the null block"))
        return Plan(stmts, value=value)

    def _plan_null_block_misuse(self, op: ops.NullBlockMisuse, _: Any) -> Plan:
        null = Name("null_block")
        write: Expr
        if op.action in ("device_free", "device_fork"):
            get, gpu = self._on(Dev.GPU)
            call = method(gpu, op.action.removeprefix("device_"), null)
            return Plan([self._null_stmt(), get, Stmt(call)])
        if op.action == "append":
            write = method(null, "append_token_ids", Lit([1]))
        elif op.action == "set_id":
            write = Call(Name("setattr"), (null, Lit("block_id"), Lit(None)))
        elif op.action == "fork":
            write = method("alloc", "fork", null)
        else:
            raise Unsupported(f"unknown null block misuse {op.action!r}")
        return Plan([self._null_stmt(), Stmt(write)])
