"""Tracker-misuse plans: one tracker edited alone (``SeqTrackerEdit``), the Aphrodite computed
tracker asked with another table's ids (``SeqLostBlocks``), and the vLLM question on a tracker
built without a block size (``SeqCachedTokensUnsized``) (model:
``models/families/v0/ops/tracker_misuse.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Attr, Call, Lit, Name, Stmt, method
from properties.families.v0.adapter.plan import Plan, table
from properties.families.v0.adapter.trackers import TrackerPlans
from properties.families.v0.adapter.values import Unsupported, checked_ints


class TrackerMisusePlans(TrackerPlans):
    """Plans of the tracker misuse, and the tracker switches the machines read."""

    def _plan_seq_tracker_edit(self, op: ops.SeqTrackerEdit, _: Any) -> Plan:
        name = "add_seq" if op.add else "remove_seq"
        if op.tracker == "computed" and not self._computed_has(name):
            raise Unsupported(f"the computed tracker has no {name}")
        return Plan([Stmt(method(f"{op.tracker}_tracker", name, Lit(op.table)))])

    def _plan_seq_lost_blocks(self, op: ops.SeqLostBlocks, _: Any) -> Plan:
        if not self._computed_has("get_cached_computed_blocks_and_update"):
            raise Unsupported("get_cached_computed_blocks_and_update is Aphrodite-generation only")
        call = method("computed_tracker", "get_cached_computed_blocks_and_update", Lit(op.table),
                      Attr(table(op.other), "physical_block_ids"))
        return Plan([Stmt(call, comment=f"the ids of t{op.other}: fewer blocks")],
                    value=lambda r: checked_ints(
                        r[-1], "ComputedBlocksTracker.get_cached_computed_blocks_and_update"))

    def tracker_caching_switch(self) -> bool:
        """Whether the target's ``ComputedBlocksTracker`` is built with ``enable_caching`` (the
        switch under which vLLM ignores ``remove_seq`` of an unknown sequence)."""
        if self.tracker_module() is None:
            return False
        computed = self._tracker_cls("ComputedBlocksTracker")
        return "enable_caching" in inspect.signature(computed).parameters

    def tracker_builds_unsized(self) -> bool:
        """Whether the target's ``ComputedBlocksTracker`` has ``get_num_cached_tokens`` and
        may be built without a ``block_size`` (a capability the machines respect)."""
        if self.tracker_module() is None or not self._computed_has("get_num_cached_tokens"):
            return False
        size = inspect.signature(self._tracker_cls("ComputedBlocksTracker")).parameters.get(
            "block_size")
        return size is not None and size.default is not inspect.Parameter.empty

    def _plan_seq_cached_tokens_unsized(self, op: ops.SeqCachedTokensUnsized,
                                        tables: Mapping[int, Any]) -> Plan:
        if not self.tracker_builds_unsized():
            raise Unsupported("the target's tracker needs a block_size")
        module = Call(Name("__import__"), (Lit(self._tracker_module()),),
                      (("fromlist", Lit(["_"])),))
        make = Call(Attr(module, "ComputedBlocksTracker"), (Name("alloc"),))
        asked = self._plan_seq_cached_tokens(ops.SeqCachedTokens(op.table, True), tables)
        question = asked.stmts[-1].expr
        if not isinstance(question, Call):
            raise Unsupported("get_num_cached_tokens is not a call")
        return Plan([Stmt(make, bind="unsized_tracker"),
                     Stmt(Call(Attr(Name("unsized_tracker"), "get_num_cached_tokens"),
                               question.args))], value=asked.value)
