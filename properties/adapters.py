"""The one place where API differences between allocators live.

:class:`FamilyAdapter` speaks to any allocator of the vLLM-v0 / Aphrodite family, including the
bundled one: it turns each operation of the vocabulary into a call plan (executed by the runner,
printed by the reproducer), classifies errors, and reads the private state the upstream family
shares (content map, evictor, refcounts) for introspection. Other allocators subclass it and
override what differs.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from models import operations as ops
from models.operations import (
    Dev,
    ErrorKind,
    Op,
    Tokens,
)
from properties.calls import Attr, Call, Expr, ListOf, Lit, Name, Stmt, method


class Unsupported(Exception):
    """The target lacks the API an operation needs (a capability the generator should respect)."""


@dataclass(slots=True)
class Plan:
    """Statements for one operation, and how to read its value from their results.

    ``creates`` is how many block handles the last statement's result yields (``-1``: as many
    as the returned list holds; ``single``: the result is one block, not a list);
    ``creates_table`` names the table variable it creates.
    """

    stmts: list[Stmt]
    value: Callable[[list[Any]], Any] = field(default=lambda results: None)
    creates: int = 0
    single: bool = False
    creates_table: str | None = None
    admission: Callable[[list[Any]], bool] | None = None


def block(handle: int) -> Name:
    return Name(f"b{handle}")


def table(handle: int) -> Name:
    return Name(f"t{handle}")


def _tokens(tokens: Tokens) -> Lit:
    return Lit(list(tokens))


def _maybe_block(handle: int | None) -> Expr:
    return Lit(None) if handle is None else block(handle)


def _pairs(mapping: Mapping[int, int]) -> list[list[int]]:
    return [[int(s), int(d)] for s, d in mapping.items()]


class FamilyAdapter:
    """Adapter for ``DeviceAwareBlockAllocator``-compatible allocators (vLLM v0, Aphrodite, ours).

    ``alloc`` is a live allocator; ``block_size`` its block size. Generation differences are
    detected from the methods the allocator has.
    """

    def __init__(self, alloc: Any, block_size: int, misuse_types: Sequence[type] = ()) -> None:
        self.alloc = alloc
        self.block_size = block_size
        self.misuse_types = tuple(misuse_types)
        module = sys.modules[type(alloc).__module__]
        package = type(alloc).__module__.rsplit(".", 1)[0]
        self.device_enum: Any = module.Device
        self.block_table_cls: Any = importlib.import_module(f"{package}.block_table").BlockTable
        self.has_aphrodite_api = hasattr(alloc, "get_computed_block_ids")
        self.has_vllm_api = hasattr(alloc, "find_cached_blocks_prefix")
        params = inspect.signature(alloc.allocate_immutable_block).parameters
        self.has_extra_hash = "extra_hash" in params
        self.null_block: Any = None

    # ------------------------------------------------------------------ environment

    def env(self) -> dict[str, Any]:
        """Names a plan may use besides block and table handles."""
        return {"alloc": self.alloc, "Device": self.device_enum, "BlockTable": self.block_table_cls}

    def device(self, dev: Dev) -> Attr:
        return Attr(Name("Device"), dev.name)

    def _extra(self, extra_hash: int | None) -> dict[str, Expr]:
        if extra_hash is None:
            return {}
        if not self.has_extra_hash:
            raise Unsupported("extra_hash needs a vLLM-generation allocator")
        return {"extra_hash": Lit(extra_hash)}

    # ------------------------------------------------------------------ plans

    def plan(self, op: Op, table_extra: Mapping[int, int | None]) -> Plan:
        """The call plan for ``op``; ``table_extra`` is each live table's extra_hash."""
        handler = getattr(self, f"_plan_{op.kind}", None)
        if handler is None:
            raise Unsupported(f"no plan for {op.kind}")
        plan: Plan = handler(op, table_extra)
        return plan

    def _plan_allocate_mutable(self, op: ops.AllocateMutable, _: Any) -> Plan:
        call = method("alloc", "allocate_mutable_block", _maybe_block(op.prev),
                      device=self.device(op.device))
        return Plan([Stmt(call)], creates=1, single=True)

    def _plan_allocate_immutable(self, op: ops.AllocateImmutable, _: Any) -> Plan:
        call = method("alloc", "allocate_immutable_block", _maybe_block(op.prev),
                      _tokens(op.tokens), device=self.device(op.device),
                      **self._extra(op.extra_hash))
        return Plan([Stmt(call)], creates=1, single=True)

    def _plan_allocate_immutable_chain(self, op: ops.AllocateImmutableChain, _: Any) -> Plan:
        chunks = Lit([list(c) for c in op.chunks])
        call = method("alloc", "allocate_immutable_blocks", _maybe_block(op.prev), chunks,
                      device=self.device(op.device), **self._extra(op.extra_hash))
        return Plan([Stmt(call)], creates=len(op.chunks))

    def _plan_append(self, op: ops.Append, _: Any) -> Plan:
        return Plan([Stmt(method(block(op.block), "append_token_ids", _tokens(op.tokens)))])

    def _plan_fork(self, op: ops.Fork, _: Any) -> Plan:
        return Plan([Stmt(method("alloc", "fork", block(op.block)))], creates=-1)

    def _plan_free(self, op: ops.Free, _: Any) -> Plan:
        return Plan([Stmt(method("alloc", "free", block(op.block)))])

    def _swap_stmt(self, blocks: Expr, src: Dev, dst: Dev) -> Stmt:
        return Stmt(method("alloc", "swap", blocks, self.device(src), self.device(dst)),
                    bind="mapping")

    def _plan_swap(self, op: ops.Swap, _: Any) -> Plan:
        blocks = ListOf(tuple(block(h) for h in op.blocks))
        return Plan([self._swap_stmt(blocks, op.src, op.dst)], value=lambda r: _pairs(r[-1]))

    def _ids(self, handles: Sequence[int]) -> ListOf:
        return ListOf(tuple(Attr(block(h), "block_id") for h in handles))

    def _plan_mark_accessed(self, op: ops.MarkAccessed, _: Any) -> Plan:
        call = method("alloc", "mark_blocks_as_accessed", self._ids(op.blocks), Lit(op.now))
        return Plan([Stmt(call)])

    def _plan_mark_computed(self, op: ops.MarkComputed, _: Any) -> Plan:
        return Plan([Stmt(method("alloc", "mark_blocks_as_computed", self._ids(op.blocks)))])

    def _plan_computed_block_ids(self, op: ops.ComputedBlockIds, _: Any) -> Plan:
        if not self.has_aphrodite_api:
            raise Unsupported("get_computed_block_ids is Aphrodite-generation only")
        call = method("alloc", "get_computed_block_ids", Lit([]), self._ids(op.blocks),
                      Lit(op.skip_last))
        return Plan([Stmt(call)], value=lambda r: [int(i) for i in r[-1]])

    def _plan_cached_prefix(self, op: ops.CachedPrefix, _: Any) -> Plan:
        if not self.has_vllm_api:
            raise Unsupported("find_cached_blocks_prefix is vLLM-generation only")
        hashes = ListOf(tuple(Attr(block(h), "content_hash") for h in op.blocks))
        call = method("alloc", "find_cached_blocks_prefix", hashes,
                      device=self.device(op.device))
        return Plan([Stmt(call)], value=lambda r: list(r[-1]))

    def _plan_count_touched(self, op: ops.CountTouched, _: Any) -> Plan:
        if not self.has_aphrodite_api:
            raise Unsupported("get_num_blocks_touched is Aphrodite-generation only")
        blocks = ListOf(tuple(block(h) for h in op.blocks))
        call = method("alloc", "get_num_blocks_touched", blocks, self.device(op.device),
                      Lit(op.lookahead))
        return Plan([Stmt(call)], value=lambda r: int(r[-1]))

    def _plan_count_full_touched(self, op: ops.CountFullTouched, _: Any) -> Plan:
        if not self.has_vllm_api:
            raise Unsupported("get_num_full_blocks_touched is vLLM-generation only")
        blocks = ListOf(tuple(block(h) for h in op.blocks))
        call = method("alloc", "get_num_full_blocks_touched", blocks, self.device(op.device))
        return Plan([Stmt(call)], value=lambda r: int(r[-1]))

    def _plan_clear_cows(self, op: ops.ClearCopyOnWrites, _: Any) -> Plan:
        return Plan([Stmt(method("alloc", "clear_copy_on_writes"))],
                    value=lambda r: [[int(s), int(d)] for s, d in r[-1]])

    def _plan_hit_rate(self, op: ops.HitRate, _: Any) -> Plan:
        call = method("alloc", "get_prefix_cache_hit_rate", self.device(op.device))
        return Plan([Stmt(call)], value=lambda r: float(r[-1]))

    def _plan_reset_prefix_cache(self, op: ops.ResetPrefixCache, _: Any) -> Plan:
        if not self.has_vllm_api:
            raise Unsupported("reset_prefix_cache is vLLM-generation only")
        args = () if op.device is None else (self.device(op.device),)
        return Plan([Stmt(method("alloc", "reset_prefix_cache", *args))],
                    value=lambda r: bool(r[-1]))

    def _plan_null_block(self, op: ops.GetNullBlock, _: Any) -> Plan:
        stmt = Stmt(method("alloc", "allocate_or_get_null_block"), bind="null_block")
        return Plan([stmt], value=lambda r: int(r[-1].block_id))

    # ------------------------------------------------------------------ tables

    def _plan_table_allocate(self, op: ops.TableAllocate, tables: Mapping[int, Any]) -> Plan:
        name = "new_table"
        make = Call(Name("BlockTable"), (),
                    (("block_size", Lit(self.block_size)), ("block_allocator", Name("alloc"))))
        fill = method(name, "allocate", _tokens(op.tokens), device=self.device(op.device),
                      **self._extra(op.extra_hash))
        return Plan([Stmt(make, bind=name), Stmt(fill)], creates_table=name)

    def _plan_table_append(self, op: ops.TableAppend, tables: Mapping[int, Any]) -> Plan:
        call = method(table(op.table), "append_token_ids", _tokens(op.tokens),
                      num_lookahead_slots=Lit(op.lookahead), **self._extra(tables[op.table]))
        return Plan([Stmt(call)])

    def _plan_table_ensure_slots(self, op: ops.TableEnsureSlots, tables: Mapping[int, Any]) -> Plan:
        call = method(table(op.table), "ensure_num_empty_slots", Lit(op.slots),
                      **self._extra(tables[op.table]))
        return Plan([Stmt(call)])

    def _plan_table_fork(self, op: ops.TableFork, _: Any) -> Plan:
        return Plan([Stmt(method(table(op.table), "fork"), bind="new_table")],
                    creates_table="new_table")

    def _plan_table_free(self, op: ops.TableFree, _: Any) -> Plan:
        return Plan([Stmt(method(table(op.table), "free"))])

    def _admission(self, tbl: Name, dst: Dev) -> tuple[list[Stmt], Callable[[list[Any]], bool]]:
        """What the engine asks before swapping a sequence: the allocator's own count of the
        blocks the swap touches against the destination's free count."""
        blocks = Attr(tbl, "blocks")
        free = Stmt(method("alloc", "get_num_free_blocks", self.device(dst)), bind="free")
        if self.has_aphrodite_api:
            need = method("alloc", "get_num_blocks_touched", blocks, self.device(dst), Lit(0))
            return [Stmt(need, bind="need"), free], lambda r: int(r[0]) <= int(r[1])
        # vLLM's block manager: partial blocks via the table, full blocks via the allocator.
        partial = method(tbl, "get_num_blocks_touched_by_append_slots",
                         method(tbl, "_get_all_token_ids"), num_lookahead_slots=Lit(0))
        full = method("alloc", "get_num_full_blocks_touched", blocks, self.device(dst))
        stmts = [Stmt(partial, bind="need_partial"), Stmt(full, bind="need_full"), free]
        return stmts, lambda r: int(r[0]) + int(r[1]) <= int(r[2])

    def _plan_table_swap(self, op: ops.TableSwap, _: Any) -> Plan:
        stmts, admitted = self._admission(table(op.table), op.dst)
        blocks = Attr(table(op.table), "blocks")
        stmts += [self._swap_stmt(blocks, op.src, op.dst),
                  Stmt(method(table(op.table), "update", blocks))]
        return Plan(stmts, value=lambda r: _pairs(r[-2]), admission=admitted)

    def _plan_table_mark_accessed(self, op: ops.TableMarkAccessed, _: Any) -> Plan:
        ids = Attr(table(op.table), "physical_block_ids")
        return Plan([Stmt(method("alloc", "mark_blocks_as_accessed", ids, Lit(op.now)))])

    # ------------------------------------------------------------------ observation

    def classify(self, exc: BaseException) -> ErrorKind:
        """Map an exception to the vocabulary's error kinds."""
        names = {cls.__name__ for cls in type(exc).__mro__}
        if "NoFreeBlocksError" in names:
            return ErrorKind.NO_FREE_BLOCKS
        if self.misuse_types and isinstance(exc, self.misuse_types):
            return ErrorKind.MISUSE
        if isinstance(exc, AssertionError):
            return ErrorKind.ASSERTION
        return ErrorKind.UNEXPECTED

    def free_count(self, dev: Dev) -> int:
        return int(self.alloc.get_num_free_blocks(getattr(self.device_enum, dev.name)))

    def drain_cows(self) -> tuple[tuple[int, int], ...]:
        """``clear_copy_on_writes()``, as the engine calls it after every scheduling step."""
        return tuple((int(s), int(d)) for s, d in self.alloc.clear_copy_on_writes())

    def block_state(self, obj: Any) -> tuple[int | None, Tokens, int | None]:
        """(id, tokens, content hash) of a block object."""
        bid = obj.block_id
        return (None if bid is None else int(bid), tuple(obj.token_ids), obj.content_hash)

    def table_state(self, obj: Any) -> tuple[tuple[int | None, ...], Tokens]:
        ids = tuple(b.block_id for b in obj.blocks)
        return ids, tuple(obj._get_all_token_ids())

    def introspect(self) -> tuple[dict[Dev, frozenset[int]], dict[Dev, frozenset[int]],
                                  dict[int, int]] | None:
        """Content-map ids, evictor ids and refcounts from the family's private state."""
        subs = getattr(self.alloc, "_allocators", None)
        if not isinstance(subs, Mapping):
            return None
        cached: dict[Dev, frozenset[int]] = {}
        evictable: dict[Dev, frozenset[int]] = {}
        refcounts: dict[int, int] = {}
        for dev in Dev:
            sub = subs.get(getattr(self.device_enum, dev.name))
            if sub is None:
                cached[dev] = evictable[dev] = frozenset()
                continue
            counter = getattr(sub, "_refcounter", None)
            counts = getattr(counter, "_refcounts", None)
            if not isinstance(counts, Mapping):
                return None
            refcounts.update({int(k): int(v) for k, v in counts.items()})
            content = getattr(sub, "_cached_blocks", None)
            if content is None:
                cached[dev] = evictable[dev] = frozenset()
                continue
            cached[dev] = frozenset(int(v) for v in content.values())
            table_ = getattr(sub.evictor, "free_table", None)
            if table_ is None:
                return None
            evictable[dev] = frozenset(int(k) for k in table_)
        return cached, evictable, refcounts

