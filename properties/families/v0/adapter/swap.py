"""Swap plans: ``alloc.swap`` (``Swap``), a whole table with the engine's admission
question first (``TableSwap``), and the custom swapper over the two device allocators
(``DeviceSwap``, through :func:`swap_by_hand`) (model: ``models/families/v0/ops/swap.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.families.v0 import operations as ops
from models.families.v0.operations import Dev
from properties.core.calls import Attr, Call, Expr, ListOf, Lit, Name, Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import PACKAGE, Plan, block, table
from properties.families.v0.adapter.values import (
    checked_bool,
    checked_int,
    checked_mapping,
    checked_opt_int,
)


class SwapPlans(AdapterCore):
    """Plans of the three swaps; the value is the mapping (or the ids before and after)."""

    def _swap_stmt(self, blocks: Expr, src: Dev, dst: Dev) -> Stmt:
        return Stmt(method("alloc", "swap", blocks, self.device(src), self.device(dst)),
                    bind="mapping")

    def _plan_swap(self, op: ops.Swap, _: Any) -> Plan:
        blocks = ListOf(tuple(block(h) for h in op.blocks))
        return Plan([self._swap_stmt(blocks, op.src, op.dst)],
                    value=lambda r: checked_mapping(r[-1], "alloc.swap"))

    def _admission(self, tbl: Name, dst: Dev) -> tuple[list[Stmt], Callable[[list[Any]], bool]]:
        """What the engine asks before swapping a sequence: the allocator's own count of the
        blocks the swap touches against the destination's free count."""
        blocks = Attr(tbl, "blocks")
        free = Stmt(method("alloc", "get_num_free_blocks", self.device(dst)), bind="free")
        if self.has_aphrodite_api:
            need = method("alloc", "get_num_blocks_touched", blocks, self.device(dst), Lit(0))
            return [Stmt(need, bind="need"), free], lambda r: (
                checked_int(r[0], "alloc.get_num_blocks_touched")
                <= checked_int(r[1], "alloc.get_num_free_blocks"))
        # vLLM's block manager: partial blocks via the table, full blocks via the allocator.
        partial = method(tbl, "get_num_blocks_touched_by_append_slots",
                         method(tbl, "_get_all_token_ids"), num_lookahead_slots=Lit(0))
        full = method("alloc", "get_num_full_blocks_touched", blocks, self.device(dst))
        stmts = [Stmt(partial, bind="need_partial"), Stmt(full, bind="need_full"), free]
        return stmts, lambda r: (
            checked_int(r[0], "BlockTable.get_num_blocks_touched_by_append_slots")
            + checked_int(r[1], "alloc.get_num_full_blocks_touched")
            <= checked_int(r[2], "alloc.get_num_free_blocks"))

    def _plan_table_swap(self, op: ops.TableSwap, _: Any) -> Plan:
        stmts, admitted = self._admission(table(op.table), op.dst)
        blocks = Attr(table(op.table), "blocks")
        stmts += [self._swap_stmt(blocks, op.src, op.dst),
                  Stmt(method(table(op.table), "update", blocks))]
        return Plan(stmts, value=lambda r: checked_mapping(r[-2], "alloc.swap"),
                    admission=admitted)

    def _plan_device_swap(self, op: ops.DeviceSwap, _: Any) -> Plan:
        src_stmt, src = self._on(op.src)
        dst_stmt, dst = self._on(op.dst)
        ids = ListOf(tuple(Attr(block(h), "block_id") for h in op.blocks))
        module = Call(Name("__import__"), (Lit(PACKAGE),), (("fromlist", Lit(["_"])),))
        swap = Call(Attr(module, "swap_by_hand"),
                    (src, dst, ListOf(tuple(block(h) for h in op.blocks))))

        def value(r: list[Any]) -> dict[str, Any]:
            before = [checked_opt_int(i, "block.block_id") for i in r[2]]
            after = [checked_opt_int(i, "block.block_id") for i in r[4]]
            return {"pairs": [[a, b] for a, b in zip(before, after, strict=True)],
                    "swapped": checked_bool(r[3], "swap_by_hand")}

        return Plan([src_stmt, dst_stmt, Stmt(ids, bind="ids_before"),
                     Stmt(swap, bind="swapped"), Stmt(ids)], value=value)



def swap_by_hand(src: Any, dst: Any, blocks: list[Any]) -> bool:
    """``src.swap_out(blocks)``, then ``dst.swap_in(blocks)``; True when done. If the swap-in
    raises ``NoFreeBlocksError``, the blocks that hold no id go back with ``src.swap_in`` in
    reverse order (last released first) and the result is False; other errors propagate."""
    src.swap_out(blocks)
    try:
        dst.swap_in(blocks)
    except Exception as exc:
        if "NoFreeBlocksError" not in {cls.__name__ for cls in type(exc).__mro__}:
            raise
        src.swap_in([b for b in reversed(blocks) if b.block_id is None])
        return False
    return True
