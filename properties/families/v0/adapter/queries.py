"""Query plans: computed ids, the cached prefix, touched counts, copy-on-writes, the hit
rate, the prefix-cache reset and the block-info extension; each value type-checked (model:
``models/families/v0/ops/queries.py``). A query of the other API generation is
:class:`~properties.families.v0.adapter.values.Unsupported`.
"""

from __future__ import annotations

from typing import Any

from models.families.v0 import operations as ops
from models.families.v0.operations import Dev
from properties.core.calls import Attr, ListOf, Lit, Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan, block
from properties.families.v0.adapter.values import (
    Unsupported,
    checked_bool,
    checked_int,
    checked_ints,
    checked_number,
    checked_pairs,
    wrong_type,
)


class QueryPlans(AdapterCore):
    """Plans of the allocator's queries."""

    def _plan_computed_block_ids(self, op: ops.ComputedBlockIds, _: Any) -> Plan:
        if not self.has_aphrodite_api:
            raise Unsupported("get_computed_block_ids is Aphrodite-generation only")
        # The first argument is in-out (the API appends to it and returns it): a tuple
        # literal is passed as a fresh list the runner does not guard against mutation.
        call = method("alloc", "get_computed_block_ids", Lit(()), self._ids(op.blocks),
                      Lit(op.skip_last))
        return Plan([Stmt(call)],
                    value=lambda r: checked_ints(r[-1], "alloc.get_computed_block_ids"))

    def _plan_cached_prefix(self, op: ops.CachedPrefix, _: Any) -> Plan:
        if not self.has_vllm_api:
            raise Unsupported("find_cached_blocks_prefix is vLLM-generation only")
        hashes = ListOf(tuple(Attr(block(h), "content_hash") for h in op.blocks))
        call = method("alloc", "find_cached_blocks_prefix", hashes,
                      device=self.device(op.device))
        return Plan([Stmt(call)],
                    value=lambda r: checked_ints(r[-1], "alloc.find_cached_blocks_prefix"))

    def _plan_count_touched(self, op: ops.CountTouched, _: Any) -> Plan:
        if not self.has_aphrodite_api:
            raise Unsupported("get_num_blocks_touched is Aphrodite-generation only")
        blocks = ListOf(tuple(block(h) for h in op.blocks))
        # No lookahead is left to the default (0, docs/API.md §5): a default that adds slots shows
        # as a wrong count.
        lookahead = (Lit(op.lookahead),) if op.lookahead else ()
        call = method("alloc", "get_num_blocks_touched", blocks, self.device(op.device),
                      *lookahead)
        return Plan([Stmt(call)],
                    value=lambda r: checked_int(r[-1], "alloc.get_num_blocks_touched"))

    def _plan_count_full_touched(self, op: ops.CountFullTouched, _: Any) -> Plan:
        if not self.has_vllm_api:
            raise Unsupported("get_num_full_blocks_touched is vLLM-generation only")
        blocks = ListOf(tuple(block(h) for h in op.blocks))
        call = method("alloc", "get_num_full_blocks_touched", blocks, self.device(op.device))
        return Plan([Stmt(call)],
                    value=lambda r: checked_int(r[-1], "alloc.get_num_full_blocks_touched"))

    def _plan_clear_cows(self, op: ops.ClearCopyOnWrites, _: Any) -> Plan:
        return Plan([Stmt(method("alloc", "clear_copy_on_writes"))],
                    value=lambda r: checked_pairs(r[-1], "alloc.clear_copy_on_writes"))

    def _plan_hit_rate(self, op: ops.HitRate, _: Any) -> Plan:
        call = method("alloc", "get_prefix_cache_hit_rate", self.device(op.device))
        return Plan([Stmt(call)],
                    value=lambda r: checked_number(r[-1], "alloc.get_prefix_cache_hit_rate"))

    def _plan_reset_prefix_cache(self, op: ops.ResetPrefixCache, _: Any) -> Plan:
        if not self.has_vllm_api:
            raise Unsupported("reset_prefix_cache is vLLM-generation only")
        args = () if op.device is None else (self.device(op.device),)
        return Plan([Stmt(method("alloc", "reset_prefix_cache", *args))],
                    value=lambda r: checked_bool(r[-1], "alloc.reset_prefix_cache"))

    def _plan_block_info(self, op: ops.BlockInfo, _: Any) -> Plan:
        if not self.has_block_info:
            raise Unsupported("get_block_refcount/get_block_device are not in this target")
        stmts: list[Stmt] = []
        for h in op.blocks:
            block_id = Attr(block(h), "block_id")
            stmts += [Stmt(method("alloc", "get_block_refcount", block_id)),
                      Stmt(method("alloc", "get_block_device", block_id))]
        devices = {getattr(self.device_enum, dev.name): dev.value for dev in Dev}

        def value(r: list[Any]) -> list[list[Any]]:
            out: list[list[Any]] = []
            for refcount, device in zip(r[::2], r[1::2], strict=True):
                name = devices.get(device) if isinstance(device, self.device_enum) else None
                if name is None:
                    raise wrong_type("alloc.get_block_device", "a Device", device)
                out.append([checked_int(refcount, "alloc.get_block_refcount"), name])
            return out

        return Plan(stmts, value=value)
