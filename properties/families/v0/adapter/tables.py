"""Block-table plans: ``BlockTable`` built over ``alloc`` and its calls, each with the
table's own ``extra_hash``, and ``TableFreeBlock`` (the allocator frees one block object a
table holds, ``models.families.v0.table_misuse``) (model: ``models/families/v0/ops/tables.py``).
A sliding-window append reads the null block's id back after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Attr, Call, Expr, Lit, Name, Stmt, method
from properties.families.v0.adapter.null_block import NullBlockPlans
from properties.families.v0.adapter.plan import Plan, table, tokens_lit


class TablePlans(NullBlockPlans):
    """Plans of the table operations; a new table is bound to ``new_table``."""

    def _plan_table_allocate(self, op: ops.TableAllocate, tables: Mapping[int, Any]) -> Plan:
        name = "new_table"
        shape: tuple[tuple[str, Expr], ...] = (("block_size", Lit(self.block_size)),
                                                ("block_allocator", Name("alloc")))
        if op.window is not None:
            shape += (("max_block_sliding_window", Lit(op.window)),)
        make = Call(Name("BlockTable"), (), shape)
        fill = method(name, "allocate", tokens_lit(op.tokens), device=self.device(op.device),
                      **self._extra(op.extra_hash))
        return Plan([Stmt(make, bind=name), Stmt(fill)], creates_table=name)

    def _plan_table_append(self, op: ops.TableAppend, tables: Mapping[int, Any]) -> Plan:
        if op.computed is None:
            call = method(table(op.table), "append_token_ids", tokens_lit(op.tokens),
                          num_lookahead_slots=Lit(op.lookahead), **self._extra(tables[op.table]))
            return Plan([Stmt(call)])
        # A sliding-window append: the value is the null block's id, read back after.
        call = method(table(op.table), "append_token_ids", tokens_lit(op.tokens),
                      num_lookahead_slots=Lit(op.lookahead), num_computed_slots=Lit(op.computed),
                      **self._extra(tables[op.table]))
        null = self._plan_null_block(ops.GetNullBlock(), None)
        return Plan([Stmt(call), *null.stmts], value=null.value)

    def _plan_table_ensure_slots(self, op: ops.TableEnsureSlots, tables: Mapping[int, Any]) -> Plan:
        call = method(table(op.table), "ensure_num_empty_slots", Lit(op.slots),
                      **self._extra(tables[op.table]))
        return Plan([Stmt(call)])

    def _plan_table_fork(self, op: ops.TableFork, _: Any) -> Plan:
        return Plan([Stmt(method(table(op.table), "fork"), bind="new_table")],
                    creates_table="new_table")

    def _plan_table_free(self, op: ops.TableFree, _: Any) -> Plan:
        return Plan([Stmt(method(table(op.table), "free"))])

    def _plan_table_mark_accessed(self, op: ops.TableMarkAccessed, _: Any) -> Plan:
        ids = Attr(table(op.table), "physical_block_ids")
        return Plan([Stmt(method("alloc", "mark_blocks_as_accessed", ids, Lit(op.now)))])

    def _plan_table_free_block(self, op: ops.TableFreeBlock, _: Any) -> Plan:
        held = method(Attr(table(op.table), "blocks"), "__getitem__", Lit(op.index))
        return Plan([Stmt(method("alloc", "free", held),
                          comment="freed behind the table's back")])
