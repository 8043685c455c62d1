"""The one place where API differences between allocators live.

:class:`FamilyAdapter` speaks to any allocator of the vLLM-v0 / Aphrodite family, including the
bundled one: it turns each operation of the vocabulary into a call plan (executed by the runner,
printed by the reproducer), classifies errors, and reads the private state the upstream family
shares (content map, evictor, refcounts) for introspection. Other allocators subclass it and
override what differs.

Every value read back from the target (counts, id lists, the swap mapping, the hit rate, blocks
and their ids, hashes and tokens, tables) goes through a ``checked_*`` helper: a value of the
wrong type raises :class:`Misbehaviour` (one line: the call, what it returned, what the API
says) before the oracle sees it. The common case costs a ``type(...) is`` test per value.
"""

from __future__ import annotations

import importlib
import inspect
import reprlib
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


class Misbehaviour(Exception):
    """The target broke the calling convention rather than an allocator invariant: a value of
    the wrong type, a list it mutated, an exception where the suite only reads. ``kind`` names
    the misbehaviour; ``str()`` is one line naming the call and what was expected."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


_short = reprlib.Repr()
_short.maxlist = _short.maxtuple = _short.maxdict = _short.maxset = 6
_short.maxstring = _short.maxother = 60


def shown(value: object) -> str:
    """``type repr`` of a value, bounded in length (what a report line shows of it); blocks
    in a list show as ``<block ID>``."""
    try:
        if isinstance(value, list | tuple) and value and not isinstance(value[0], int | list) \
                and hasattr(value[0], "block_id"):
            value = type(value)(_BlockShown(b) for b in value)
        text = _short.repr(value)
    except Exception as exc:  # a repr that raises must not hide the real finding
        text = f"<repr raised {type(exc).__name__}>"
    return f"{type(value).__name__} {text}"


_INT = frozenset({int})
_OPT_INT = frozenset({int, type(None)})


class _BlockShown:
    def __init__(self, block: object) -> None:
        self.block = block

    def __repr__(self) -> str:
        return f"<block {getattr(self.block, 'block_id', '?')!r}>"


def wrong_type(what: str, expected: str, got: object) -> Misbehaviour:
    return Misbehaviour("wrong type", f"{what} returned {shown(got)}, expected {expected}")


def is_int(value: object) -> bool:
    """An ``int`` that is not a ``bool`` (the common case costs one ``type`` check)."""
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def checked_int(value: Any, what: str) -> int:
    if type(value) is int:
        return value
    if is_int(value):
        return int(value)
    raise wrong_type(what, "int", value)


def checked_opt_int(value: Any, what: str) -> int | None:
    if value is None or type(value) is int:
        return value
    if is_int(value):
        return int(value)
    raise wrong_type(what, "int or None", value)


def checked_ints(value: Any, what: str, item: str = "int") -> list[int]:
    """A ``list`` of ints (a generator, tuple or set is a wrong type: the API says list)."""
    if type(value) is not list:
        raise wrong_type(what, f"list of {item}", value)
    for x in value:
        if not is_int(x):
            raise wrong_type(what, f"list of {item}", value)
    return list(value)


def checked_pairs(value: Any, what: str) -> list[list[int]]:
    """A list of (int, int) pairs, as ``clear_copy_on_writes`` returns."""
    if type(value) is not list:
        raise wrong_type(what, "list of (int, int)", value)
    out = []
    for pair in value:
        if not isinstance(pair, tuple | list) or len(pair) != 2 or not is_int(pair[0]) \
                or not is_int(pair[1]):
            raise wrong_type(what, "list of (int, int)", value)
        out.append([int(pair[0]), int(pair[1])])
    return out


def checked_mapping(value: Any, what: str) -> list[list[int]]:
    """A ``{int: int}`` mapping, as ``swap`` returns; as ``[[src, dst], ...]``."""
    if not isinstance(value, Mapping):
        raise wrong_type(what, "dict of int -> int", value)
    out = []
    for s, d in value.items():
        if not is_int(s) or not is_int(d):
            raise wrong_type(what, "dict of int -> int", value)
        out.append([int(s), int(d)])
    return out


def checked_number(value: Any, what: str) -> float:
    """A float (an int is accepted: the naive allocator's hit rate is ``-1``)."""
    if isinstance(value, float) or is_int(value):
        return float(value)
    raise wrong_type(what, "float", value)


def checked_bool(value: Any, what: str) -> bool:
    if type(value) is not bool:
        raise wrong_type(what, "bool", value)
    return value


def checked_block(value: Any, what: str) -> Any:
    """A block object: something with ``block_id``, ``token_ids`` and ``content_hash``."""
    if value is None or isinstance(value, int | float | str | bytes | list | tuple | dict) \
            or not hasattr(value, "block_id") or not hasattr(value, "token_ids"):
        raise wrong_type(what, "a block", value)
    return value


def checked_blocks(value: Any, what: str) -> list[Any]:
    if type(value) is not list:
        raise wrong_type(what, "list of blocks", value)
    for b in value:
        checked_block(b, what)
    return value


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


class FamilyAdapter:
    """Adapter for ``DeviceAwareBlockAllocator``-compatible allocators (vLLM v0, Aphrodite, ours).

    ``alloc`` is a live allocator; ``block_size`` its block size. Generation differences are
    detected from the methods the allocator has.
    """

    def __init__(self, alloc: Any, block_size: int, misuse_types: Sequence[type] = ()) -> None:
        if not hasattr(alloc, "allocate_immutable_block") or isinstance(alloc, type):
            raise wrong_type("the factory", "an allocator", alloc)
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
        self.last_drained: Any = None

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
        return Plan([self._swap_stmt(blocks, op.src, op.dst)],
                    value=lambda r: checked_mapping(r[-1], "alloc.swap"))

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
        call = method("alloc", "get_num_blocks_touched", blocks, self.device(op.device),
                      Lit(op.lookahead))
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

    def _plan_null_block(self, op: ops.GetNullBlock, _: Any) -> Plan:
        stmt = Stmt(method("alloc", "allocate_or_get_null_block"), bind="null_block")
        return Plan([stmt], value=lambda r: checked_int(
            checked_block(r[-1], "alloc.allocate_or_get_null_block").block_id,
            "allocate_or_get_null_block().block_id"))

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
        return checked_int(self.alloc.get_num_free_blocks(getattr(self.device_enum, dev.name)),
                           f"alloc.get_num_free_blocks(Device.{dev.name})")

    def drain_cows(self) -> tuple[tuple[int, int], ...]:
        """``clear_copy_on_writes()``, as the engine calls it after every scheduling step."""
        raw = self.alloc.clear_copy_on_writes()
        self.last_drained = raw  # the runner checks it is not changed afterwards
        pairs = checked_pairs(raw, "alloc.clear_copy_on_writes")
        return tuple((s, d) for s, d in pairs)

    def block_state(self, obj: Any) -> tuple[int | None, Tokens, int | None]:
        """(id, tokens, content hash) of a block object, type-checked."""
        bid = obj.block_id
        if bid is not None and type(bid) is not int:
            bid = checked_opt_int(bid, "block.block_id")
        toks = obj.token_ids
        if type(toks) is not list or not set(map(type, toks)) <= _INT:
            toks = checked_ints(toks, "block.token_ids")
        chash = obj.content_hash
        if chash is not None and type(chash) is not int:
            chash = checked_opt_int(chash, "block.content_hash")
        return bid, tuple(toks), chash

    def table_state(self, obj: Any) -> tuple[tuple[int | None, ...], Tokens]:
        """(ids, tokens) of a block table; ``blocks``, ``physical_block_ids`` and the token
        list are type-checked (``physical_block_ids`` is the table's own list, see API.md)."""
        blocks = obj.blocks
        if type(blocks) is not list:
            raise wrong_type("BlockTable.blocks", "list of blocks", blocks)
        ids = tuple(b.block_id for b in blocks)
        if not set(map(type, ids)) <= _OPT_INT:
            for i in ids:
                checked_opt_int(i, "BlockTable.blocks[i].block_id")
        physical = obj.physical_block_ids
        if type(physical) is not list or not set(map(type, physical)) <= _INT:
            checked_ints(physical, "BlockTable.physical_block_ids")
        toks = obj._get_all_token_ids()
        if type(toks) is not list or not set(map(type, toks)) <= _INT:
            toks = checked_ints(toks, "BlockTable._get_all_token_ids()")
        return ids, tuple(toks)

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

