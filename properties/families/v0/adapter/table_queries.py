"""Table and id-space query plans: a table's slot counts, the id space, the swap log, and
re-allocating a table (model: ``models/families/v0/ops/table_queries.py``).
"""

from __future__ import annotations

import inspect
from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Attr, Call, Lit, Name, Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan, table, tokens_lit
from properties.families.v0.adapter.values import (
    checked_id_set,
    checked_int,
    checked_ints,
    checked_pairs,
)


class TableQueryPlans(AdapterCore):
    """Plans of the table and id-space queries."""

    def _plan_table_slots(self, op: ops.TableSlots, _: Any) -> Plan:
        tbl = table(op.table)
        unseen = method(tbl, "get_unseen_token_ids", tokens_lit(op.tokens))
        touched = method(tbl, "get_num_blocks_touched_by_append_slots", Name("unseen"),
                         Lit(op.lookahead))
        stmts = [Stmt(Attr(tbl, "num_full_slots")), Stmt(unseen, bind="unseen"), Stmt(touched)]
        required = self.block_table_cls.get_num_required_blocks
        if "num_lookahead_slots" in inspect.signature(required).parameters:
            # No lookahead is left to the default (0, docs/API.md §12): a default that adds slots
            # shows as a wrong count.
            lookahead = (Lit(op.lookahead),) if op.lookahead else ()
            stmts.append(Stmt(Call(Attr(Name("BlockTable"), "get_num_required_blocks"),
                                   (tokens_lit(op.tokens), Lit(self.block_size), *lookahead))))

        def value(r: list[Any]) -> dict[str, Any]:
            out = {"full_slots": checked_int(r[0], "BlockTable.num_full_slots"),
                   "unseen": checked_ints(r[1], "BlockTable.get_unseen_token_ids"),
                   "touched": checked_int(r[2],
                                          "BlockTable.get_num_blocks_touched_by_append_slots")}
            if len(r) > 3:
                out["required"] = checked_int(r[3], "BlockTable.get_num_required_blocks")
            return out

        return Plan(stmts, value=value)

    def _plan_id_space(self, op: ops.IdSpace, _: Any) -> Plan:
        dev = self.device(op.device)
        stmts = [Stmt(method("alloc", "get_num_total_blocks", dev)),
                 Stmt(Attr(Name("alloc"), "all_block_ids"))]
        stmts += [Stmt(method("alloc", "get_physical_block_id", dev, Lit(i))) for i in op.ids]
        return Plan(stmts, value=lambda r: {
            "total": checked_int(r[0], "alloc.get_num_total_blocks"),
            "all": sorted(checked_id_set(r[1], "alloc.all_block_ids")),
            "physical": [checked_int(x, "alloc.get_physical_block_id") for x in r[2:]]})

    def _plan_swap_log(self, op: ops.SwapLog, _: Any) -> Plan:
        return Plan([Stmt(method("alloc", "get_and_reset_swaps"))],
                    value=lambda r: checked_pairs(r[-1], "alloc.get_and_reset_swaps"))

    def _plan_table_reallocate(self, op: ops.TableReallocate, _: Any) -> Plan:
        return Plan([Stmt(method(table(op.table), "allocate", tokens_lit(op.tokens)))])
