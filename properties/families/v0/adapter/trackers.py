"""Engine-side plans (``ENGINE_OPS``, model: ``models/families/v0/ops/trackers.py``): the common
computed prefix of a batch, bursts of cache queries, and the per-sequence trackers. Trackers
come from ``<package>.prefix_caching_block`` of the allocator (or the module of a class it
derives from); the sequence stand-in is :class:`EngineSeq`. Both are reached with
``__import__`` so the reproducer's script replays them as is. The flavour (Aphrodite
``add_seq`` / vLLM ``block_size``) is read from the tracker class; the trackers cache only
when the GPU allocator caches prefixes.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Attr, Call, Expr, ListOf, Lit, Name, Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import PACKAGE, Plan, block, table
from properties.families.v0.adapter.values import Unsupported, checked_int, checked_ints


class TrackerPlans(AdapterCore):
    """Plans of the engine-side operations; the trackers are bound to ``computed_tracker`` and
    ``access_tracker``."""

    def tracker_module(self) -> str | None:
        """The module defining the target's trackers: that of a class the allocator (or its
        GPU allocator) derives from, or ``prefix_caching_block`` of its package; None if the
        target has none (a capability the machines respect)."""
        if "_trackers_in" not in self.__dict__:
            self._trackers_in = self._find_tracker_module()
        return self._trackers_in

    def _find_tracker_module(self) -> str | None:
        gpu = self._gpu_allocator()
        names: list[str] = []
        for obj in (gpu, self.alloc):
            for cls in type(obj).__mro__ if obj is not None else ():
                names += [cls.__module__, f"{cls.__module__.rsplit('.', 1)[0]}"
                          ".prefix_caching_block"]
        for name in dict.fromkeys(names):
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            if hasattr(module, "ComputedBlocksTracker") and hasattr(
                    module, "LastAccessBlocksTracker"):
                return name
        return None

    def _tracker_module(self) -> str:
        name = self.tracker_module()
        if name is None:
            raise Unsupported("the target has no sequence trackers")
        return name

    def _tracker_cls(self, name: str) -> Any:
        cls = getattr(importlib.import_module(self._tracker_module()), name, None)
        if cls is None:
            raise Unsupported(f"the target has no {name}")
        return cls

    def _computed_has(self, name: str) -> bool:
        return hasattr(self._tracker_cls("ComputedBlocksTracker"), name)

    def _gpu_caches(self) -> bool:
        """Whether the GPU allocator caches prefixes (it has an evictor), as the engine's
        ``enable_caching``."""
        return getattr(self._gpu_allocator(), "evictor", None) is not None

    def _plan_common_computed_ids(self, op: ops.CommonComputedIds, _: Any) -> Plan:
        lists = ListOf(tuple(self._ids(lst) for lst in op.lists))
        call = method("alloc", "get_common_computed_block_ids", lists)
        what = "alloc.get_common_computed_block_ids"
        return Plan([Stmt(call)], value=lambda r: "" if r[-1] == "" and type(r[-1]) is str
                    else checked_ints(r[-1], what))

    def _plan_hit_burst(self, op: ops.HitBurst, _: Any) -> Plan:
        b = block(op.block)
        get = method("alloc", "allocate_immutable_block", Attr(b, "prev_block"),
                     Attr(b, "token_ids"), device=self.device(op.device),
                     **self._extra(op.extra_hash))
        # One query and one free, repeated: the statements are immutable, so shared.
        return Plan([Stmt(get, bind="burst"),
                     Stmt(method("alloc", "free", Name("burst")))] * op.count)

    def _plan_tracker_start(self, op: ops.TrackerStart, _: Any) -> Plan:
        module = Call(Name("__import__"), (Lit(self._tracker_module()),),
                      (("fromlist", Lit(["_"])),))
        computed = self._tracker_cls("ComputedBlocksTracker")
        self._tracker_cls("LastAccessBlocksTracker")
        kwargs: dict[str, Expr] = {}
        if "block_size" in inspect.signature(computed).parameters:
            kwargs = {"block_size": Lit(self.block_size),
                      "enable_caching": Lit(self._gpu_caches())}  # the engine's setting
        return Plan([
            Stmt(Call(Attr(module, "ComputedBlocksTracker"), (Name("alloc"),),
                      tuple(kwargs.items())), bind="computed_tracker"),
            Stmt(Call(Attr(module, "LastAccessBlocksTracker"), (Name("alloc"),)),
                 bind="access_tracker"),
        ])

    def _plan_seq_track(self, op: ops.SeqTrack, _: Any) -> Plan:
        stmts = [Stmt(method("access_tracker", "add_seq", Lit(op.table)))]
        if self._computed_has("add_seq"):
            stmts.append(Stmt(method("computed_tracker", "add_seq", Lit(op.table))))
        return Plan(stmts)

    def _plan_seq_untrack(self, op: ops.SeqUntrack, _: Any) -> Plan:
        stmts = [Stmt(method("access_tracker", "remove_seq", Lit(op.table)))]
        if op.computed:
            stmts.append(Stmt(method("computed_tracker", "remove_seq", Lit(op.table))))
        return Plan(stmts)

    def _plan_seq_cached_tokens(self, op: ops.SeqCachedTokens,
                                tables: Mapping[int, Any]) -> Plan:
        if not self._computed_has("get_num_cached_tokens"):
            raise Unsupported("get_num_cached_tokens is vLLM-generation only")
        extra = tables.get(op.table)
        seq = Call(Attr(Call(Name("__import__"), (Lit(PACKAGE),), (("fromlist", Lit(["_"])),)),
                        "EngineSeq"),
                   (Lit(op.table), method(table(op.table), "_get_all_token_ids"),
                    Lit(None) if extra is None else self._extra_expr(extra),
                    Lit(op.prefill)))
        call = method("computed_tracker", "get_num_cached_tokens", seq)
        return Plan([Stmt(call)], value=lambda r: checked_int(
            r[-1], "ComputedBlocksTracker.get_num_cached_tokens"))

    def _plan_seq_computed_ids(self, op: ops.SeqComputedIds, _: Any) -> Plan:
        if not self._computed_has("get_cached_computed_blocks_and_update"):
            raise Unsupported("get_cached_computed_blocks_and_update is Aphrodite-generation only")
        call = method("computed_tracker", "get_cached_computed_blocks_and_update", Lit(op.table),
                      Attr(table(op.table), "physical_block_ids"))
        # freed behind (tracker lifecycle): the tracker returns the list it caches and later
        # extends in place (docs/API.md §10; upstream does the same), so the engine reads a copy
        # taken at once and the runner watches that copy, not the tracker's own list.
        call = Call(Attr(Call(Name("__import__"), (Lit("copy"),)), "copy"), (call,))
        return Plan([Stmt(call)], value=lambda r: checked_ints(
            r[-1], "ComputedBlocksTracker.get_cached_computed_blocks_and_update"))

    def _plan_seq_access(self, op: ops.SeqAccess, _: Any) -> Plan:
        call = method("access_tracker", "update_last_access", Lit(op.table), Lit(op.now))
        return Plan([Stmt(call)])

    def _plan_seq_stamp_blocks(self, op: ops.SeqStampBlocks, _: Any) -> Plan:
        call = method("access_tracker", "update_seq_blocks_last_access", Lit(op.table),
                      Attr(table(op.table), "physical_block_ids"))
        return Plan([Stmt(call)])


class EngineSeq:
    """The least of a ``Sequence`` the trackers read: ``seq_id``, ``get_token_ids()``,
    ``extra_hash()`` and ``is_prefill()``."""

    def __init__(self, seq_id: int, token_ids: list[int], extra_hash: int | None,
                 prefill: bool) -> None:
        self.seq_id = seq_id
        self._token_ids = list(token_ids)
        self._extra_hash = extra_hash
        self._prefill = prefill

    def get_token_ids(self) -> list[int]:
        return self._token_ids

    def extra_hash(self) -> int | None:
        return self._extra_hash

    def is_prefill(self) -> bool:
        return self._prefill
