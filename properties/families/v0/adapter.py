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

from models.families.v0 import operations as ops
from models.families.v0.hit_window import FIELDS as WINDOW_FIELDS
from models.families.v0.operations import (
    Dev,
    ErrorKind,
    Op,
    Tokens,
)
from properties.core.calls import Attr, Call, Expr, ListOf, Lit, Name, Stmt, method


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


def checked_id_set(value: Any, what: str) -> frozenset[int]:
    """A set of ints, as ``all_block_ids`` returns (a list is a wrong type: the API says a
    frozenset)."""
    if not isinstance(value, frozenset | set) or not all(is_int(x) for x in value):
        raise wrong_type(what, "frozenset of int", value)
    return frozenset(int(x) for x in value)


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


def _deep_list(value: Any) -> Any:
    return [_deep_list(v) for v in value] if isinstance(value, tuple) else value


def _bad_literal(bad: Any) -> Lit:
    """``Malformed.bad`` as a call argument: lists as lists, each call getting a fresh
    copy checked for changes; a list that mixes lists and other items is passed unchecked
    (the runner copies only uniform lists)."""
    value = _deep_list(bad)
    if isinstance(value, list) and value and isinstance(value[0], list) \
            and not all(isinstance(v, list) for v in value):
        return Lit(tuple(value))
    return Lit(value)


#: The request keys a target's own key builder folds in (``Capabilities.extra_key_fields``).
KEY_FIELDS = frozenset({"lora", "salt", "mm", "bytes"})


class FamilyAdapter:
    """Adapter for ``DeviceAwareBlockAllocator``-compatible allocators (vLLM v0, Aphrodite, ours).

    ``alloc`` is a live allocator; ``block_size`` its block size. Generation differences are
    detected from the methods the allocator has. ``extra_key_function`` (``module:callable``,
    a target's claim) renders :class:`~models.families.v0.operations.ExtraKey` values; see
    :meth:`_detect_extra_keys` for the default.
    """

    def __init__(self, alloc: Any, block_size: int, misuse_types: Sequence[type] = (),
                 extra_key_function: str | None = None) -> None:
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
        self.extra_key_function, self.extra_key_fields = self._detect_extra_keys(
            package, extra_key_function)
        # Extension queries (``BlockInfo``): a detected capability, vLLM 0.8 lacks them.
        self.has_block_info = all(callable(getattr(alloc, name, None)) for name in
                                  ("get_block_refcount", "get_block_device"))
        # Stale ids (``MarkStaleIds``): the id each freed block handle held (the runner
        # records it at the free: the freed object no longer shows it).
        self.freed_ids: dict[int, int] = {}
        # Content hash (``HashRecompute``): the prefix-caching block class's public
        # ``hash_block_tokens``, static (Aphrodite) or a classmethod taking ``extra_hash``.
        self.has_hash_recompute, self.hash_takes_extra, self.hash_sentinel = \
            self._detect_hash_function(package)
        self.null_block: Any = None
        self.last_drained: Any = None

    # ------------------------------------------------------------------ environment

    def env(self) -> dict[str, Any]:
        """Names a plan may use besides block and table handles."""
        return {"alloc": self.alloc, "Device": self.device_enum, "BlockTable": self.block_table_cls,
                "__import__": __import__,  # engine-side plans import the trackers
                "setattr": setattr}  # writes to the null block's properties

    def device(self, dev: Dev) -> Attr:
        return Attr(Name("Device"), dev.name)

    def _extra(self, extra_hash: ops.Extra) -> dict[str, Expr]:
        if extra_hash is None:
            return {}
        return {"extra_hash": self._extra_expr(extra_hash)}

    # ------------------------------------------------------------------ extra keys

    def _detect_extra_keys(self, package: str, claimed: str | None
                           ) -> tuple[tuple[str, str] | None, frozenset[str]]:
        """The extra-key function as (module, name) and the ExtraKey fields it folds in:
        the claimed one, else ``<package>.hashing.make_extra_hash`` (the bundled allocator's),
        else none, and the engine's LoRA-only ``Sequence.extra_hash`` (vLLM 0.8)."""
        if not self.has_extra_hash:
            return None, frozenset()
        if claimed is not None:
            module_name, sep, name = claimed.partition(":")
            if not sep or not callable(getattr(importlib.import_module(module_name), name, None)):
                raise wrong_type("the extra_key_function claim", "module:callable", claimed)
            return (module_name, name), KEY_FIELDS
        try:
            hashing = importlib.import_module(f"{package}.hashing")
        except ImportError:
            hashing = None
        if callable(getattr(hashing, "make_extra_hash", None)):
            return (f"{package}.hashing", "make_extra_hash"), KEY_FIELDS
        return None, frozenset({"lora"})

    def _extra_expr(self, extra: int | ops.ExtraKey) -> Expr:
        """``extra_hash`` as the engine computes it: an int as itself; an ExtraKey through
        the target's extra-key function (so a reproducer shows the keys, not a digest)."""
        if not self.has_extra_hash:
            raise Unsupported("extra_hash needs a vLLM-generation allocator")
        if not isinstance(extra, ops.ExtraKey):
            return Lit(extra)
        missing = extra.fields_used - self.extra_key_fields
        if missing:
            raise Unsupported(f"the target's extra key ignores {sorted(missing)}")
        if self.extra_key_function is None:
            module_name, name = __name__, "sequence_extra_hash"
            # the engine's "no LoRA" is 0 (the empty key renders as None)
            kwargs: dict[str, Expr] = {"lora_int_id": Lit(extra.lora_id or 0)}
        else:
            module_name, name = self.extra_key_function
            kwargs = {}
            if extra.lora_id is not None:
                kwargs["lora_id"] = Lit(extra.lora_id)
            if extra.cache_salt is not None:
                kwargs["cache_salt"] = Lit(extra.cache_salt)
            if extra.mm_hashes:
                kwargs["mm_hashes"] = Lit(extra.mm_hashes)
        module = Call(Name("__import__"), (Lit(module_name),), (("fromlist", Lit(["_"])),))
        return Call(Attr(module, name), (), tuple(kwargs.items()))

    # ------------------------------------------------------------------ plans

    def plan(self, op: Op, table_extra: Mapping[int, ops.Extra]) -> Plan:
        """The call plan for ``op``; ``table_extra`` is each live table's extra_hash."""
        handler = getattr(self, f"_plan_{op.kind}", None)
        if handler is None:
            raise Unsupported(f"no plan for {op.kind}")
        plan: Plan = handler(op, table_extra)
        return plan

    def _plan_allocate_mutable(self, op: ops.AllocateMutable, _: Any) -> Plan:
        call = method("alloc", "allocate_mutable_block", _maybe_block(op.prev),
                      device=self.device(op.device), **self._extra(op.extra_hash))
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
        # No lookahead is left to the default (0, API.md 5): a default that adds slots shows
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

    def _plan_null_block(self, op: ops.GetNullBlock, _: Any) -> Plan:
        stmt = Stmt(method("alloc", "allocate_or_get_null_block"), bind="null_block")
        return Plan([stmt], value=lambda r: checked_int(
            checked_block(r[-1], "alloc.allocate_or_get_null_block").block_id,
            "allocate_or_get_null_block().block_id"))

    # ------------------------------------------------------------------ block queries

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

    # ------------------------------------------------------------------ content hash

    def block_keys(self, contents: Sequence[tuple[Sequence[int] | None, Sequence[int]]],
                   ) -> list[int | None]:
        """The ``content_hash`` of each content allocated as a full immutable GPU block (after
        an immutable block of its prefix tokens when that is given), read straight from the
        target (``properties.families.v0.hash_quality``). Every block stays allocated: the pool
        must hold them all. A value that is not an int (or None) is a type violation."""
        gpu = self.device_enum.GPU
        out: list[int | None] = []
        for prev_tokens, tokens in contents:
            prev = None if prev_tokens is None else self.alloc.allocate_immutable_block(
                prev_block=None, token_ids=list(prev_tokens), device=gpu)
            block = self.alloc.allocate_immutable_block(prev_block=prev, token_ids=list(tokens),
                                                        device=gpu)
            out.append(checked_opt_int(block.content_hash, "block.content_hash"))
        return out

    @staticmethod
    def _detect_hash_function(package: str) -> tuple[bool, bool, bool]:
        """Whether ``<package>.prefix_caching_block.PrefixCachingBlock.hash_block_tokens``
        exists, whether it takes ``extra_hash`` and whether the class has the ``_none_hash``
        sentinel (both vLLM generation)."""
        try:
            module = importlib.import_module(f"{package}.prefix_caching_block")
        except ImportError:
            return False, False, False
        cls = getattr(module, "PrefixCachingBlock", None)
        func = getattr(cls, "hash_block_tokens", None)
        if not callable(func):
            return False, False, False
        return (True, "extra_hash" in inspect.signature(func).parameters,
                isinstance(getattr(cls, "_none_hash", None), int))

    @staticmethod
    def _int_like(value: Expr, helper: str = "int_like") -> Call:
        """``value`` (token ids; a hash with ``helper="int_like_hash"``) as instances of an
        ``int`` subclass (``properties.families.v0.strategies``)."""
        module = Call(Name("__import__"), (Lit("properties.families.v0.strategies"),),
                      (("fromlist", Lit(["_"])),))
        return Call(Attr(module, helper), (value,))

    def _plan_hash_recompute(self, op: ops.HashRecompute, _: Any) -> Plan:
        if not self.has_hash_recompute:
            raise Unsupported("the target's blocks have no hash_block_tokens")
        b = block(op.block)
        prev_hash: Expr = Lit(None) if op.is_first_block \
            else Attr(Attr(b, "prev_block"), "content_hash")
        if op.sentinel:
            if not self.hash_sentinel:
                raise Unsupported("the target's blocks have no _none_hash sentinel")
            prev_hash = Attr(Attr(b, "__class__"), "_none_hash")
        tokens: Expr = Attr(b, "token_ids")
        if op.int_like:
            tokens = self._int_like(tokens)
            if not op.is_first_block and not op.sentinel:
                prev_hash = self._int_like(prev_hash, "int_like_hash")
        kwargs = (("extra_hash", Attr(b, "extra_hash")),) if self.hash_takes_extra else ()
        call = Call(Attr(Attr(b, "__class__"), "hash_block_tokens"),
                    (Lit(op.is_first_block), prev_hash, tokens), kwargs)
        return Plan([Stmt(Attr(b, "content_hash")), Stmt(call)], value=lambda r: [
            checked_opt_int(r[0], "block.content_hash"),
            checked_int(r[1], "PrefixCachingBlock.hash_block_tokens")])

    def _plan_allocate_immutable_int_like(self, op: ops.AllocateImmutableIntLike,
                                          _: Any) -> Plan:
        call = method("alloc", "allocate_immutable_block", _maybe_block(op.prev),
                      self._int_like(_tokens(op.tokens)), device=self.device(op.device),
                      **self._extra(op.extra_hash))
        return Plan([Stmt(call)], creates=1, single=True)

    # ------------------------------------------------------------------ engine-side
    # Trackers come from ``<package>.prefix_caching_block`` of the allocator; the sequence
    # stand-in is :class:`EngineSeq`. Both are reached with ``__import__`` so the reproducer's
    # script replays them as is. The flavour (Aphrodite ``add_seq`` / vLLM ``block_size``) is
    # read from the tracker class.

    def tracker_module(self) -> str | None:
        """The module defining the target's trackers: that of a class the allocator (or its
        GPU allocator) derives from, or ``prefix_caching_block`` of its package; None if the
        target has none (a capability the machines respect)."""
        if "_trackers_in" not in self.__dict__:
            self._trackers_in = self._find_tracker_module()
        return self._trackers_in

    def _gpu_allocator(self) -> object | None:
        """The target's GPU allocator (vLLM/Aphrodite ``CpuGpuBlockAllocator._allocators``),
        or None when the target does not expose one."""
        subs = getattr(self.alloc, "_allocators", None)
        return subs.get(self.device_enum.GPU) if isinstance(subs, Mapping) else None

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
        stmts: list[Stmt] = []
        for _i in range(op.count):
            stmts += [Stmt(get, bind="burst"), Stmt(method("alloc", "free", Name("burst")))]
        return Plan(stmts)

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

    def _computed_has(self, name: str) -> bool:
        return hasattr(self._tracker_cls("ComputedBlocksTracker"), name)

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
        seq = Call(Attr(Call(Name("__import__"), (Lit(__name__),), (("fromlist", Lit(["_"])),)),
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
        # extends in place (API.md 10; upstream does the same), so the engine reads a copy
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

    # ------------------------------------------------------------------ stale ids
    # ``MarkStaleIds`` passes the ids freed handles held as literals; ``SeqTrackerEdit``
    # calls one tracker; the trackers cache only when the GPU allocator caches prefixes.

    def _gpu_caches(self) -> bool:
        """Whether the GPU allocator caches prefixes (it has an evictor), as the engine's
        ``enable_caching``."""
        return getattr(self._gpu_allocator(), "evictor", None) is not None

    def _plan_mark_stale_ids(self, op: ops.MarkStaleIds, _: Any) -> Plan:
        ids: list[Expr] = []
        for h in op.blocks:
            freed = self.freed_ids.get(h)
            ids.append(Attr(block(h), "block_id") if freed is None else Lit(freed))
        call = method("alloc", "mark_blocks_as_accessed", ListOf(tuple(ids)), Lit(op.now))
        stale = any(h in self.freed_ids for h in op.blocks)
        return Plan([Stmt(call, comment="literal ids: held by freed blocks" if stale else "")])

    def _plan_seq_tracker_edit(self, op: ops.SeqTrackerEdit, _: Any) -> Plan:
        name = "add_seq" if op.add else "remove_seq"
        if op.tracker == "computed" and not self._computed_has(name):
            raise Unsupported(f"the computed tracker has no {name}")
        return Plan([Stmt(method(f"{op.tracker}_tracker", name, Lit(op.table)))])

    # ------------------------------------------------------------------ freed behind
    # ``TableFreeBlock``: the allocator frees one block object a table holds
    # (models.families.v0.table_misuse).

    def _plan_table_free_block(self, op: ops.TableFreeBlock, _: Any) -> Plan:
        held = method(Attr(table(op.table), "blocks"), "__getitem__", Lit(op.index))
        return Plan([Stmt(method("alloc", "free", held),
                          comment="freed behind the table's back")])

    # Tracker misuse (models.families.v0.ops.tracker_misuse): the Aphrodite computed tracker
    # asked with another table's ids, and the vLLM question on a tracker built without a block size.

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

    # ------------------------------------------------------------------ end freed behind

    # ------------------------------------------------------------------ tables

    def _plan_table_allocate(self, op: ops.TableAllocate, tables: Mapping[int, Any]) -> Plan:
        name = "new_table"
        shape: tuple[tuple[str, Expr], ...] = (("block_size", Lit(self.block_size)),
                                                ("block_allocator", Name("alloc")))
        if op.window is not None:
            shape += (("max_block_sliding_window", Lit(op.window)),)
        make = Call(Name("BlockTable"), (), shape)
        fill = method(name, "allocate", _tokens(op.tokens), device=self.device(op.device),
                      **self._extra(op.extra_hash))
        return Plan([Stmt(make, bind=name), Stmt(fill)], creates_table=name)

    def _plan_table_append(self, op: ops.TableAppend, tables: Mapping[int, Any]) -> Plan:
        if op.computed is None:
            call = method(table(op.table), "append_token_ids", _tokens(op.tokens),
                          num_lookahead_slots=Lit(op.lookahead), **self._extra(tables[op.table]))
            return Plan([Stmt(call)])
        # A sliding-window append: the value is the null block's id, read back after.
        call = method(table(op.table), "append_token_ids", _tokens(op.tokens),
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

    # ------------------------------------------------------------------ table queries

    def _plan_table_slots(self, op: ops.TableSlots, _: Any) -> Plan:
        tbl = table(op.table)
        unseen = method(tbl, "get_unseen_token_ids", _tokens(op.tokens))
        touched = method(tbl, "get_num_blocks_touched_by_append_slots", Name("unseen"),
                         Lit(op.lookahead))
        stmts = [Stmt(Attr(tbl, "num_full_slots")), Stmt(unseen, bind="unseen"), Stmt(touched)]
        required = self.block_table_cls.get_num_required_blocks
        if "num_lookahead_slots" in inspect.signature(required).parameters:
            # No lookahead is left to the default (0, API.md 12): a default that adds slots
            # shows as a wrong count.
            lookahead = (Lit(op.lookahead),) if op.lookahead else ()
            stmts.append(Stmt(Call(Attr(Name("BlockTable"), "get_num_required_blocks"),
                                   (_tokens(op.tokens), Lit(self.block_size), *lookahead))))

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

    # The null block's surface and table misuse (read-outs type-checked like the rest).

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

    def _plan_table_reallocate(self, op: ops.TableReallocate, _: Any) -> Plan:
        return Plan([Stmt(method(table(op.table), "allocate", _tokens(op.tokens)))])

    # ------------------------------------------------------------------ malformed calls

    #: Where each validated field of an operation lands in the last call of its plan: a
    #: positional index or a keyword (appended when the plan leaves it out).
    MALFORMED_SLOTS: dict[tuple[str, str], int | str] = {
        ("allocate_mutable", "prev"): 0, ("allocate_mutable", "device"): "device",
        ("allocate_mutable", "extra_hash"): "extra_hash",
        ("allocate_immutable", "prev"): 0, ("allocate_immutable", "tokens"): 1,
        ("allocate_immutable", "device"): "device",
        ("allocate_immutable", "extra_hash"): "extra_hash",
        ("allocate_immutable_chain", "prev"): 0, ("allocate_immutable_chain", "chunks"): 1,
        ("allocate_immutable_chain", "device"): "device",
        ("allocate_immutable_chain", "extra_hash"): "extra_hash",
        ("append", "tokens"): 0, ("fork", "block"): 0, ("free", "block"): 0,
        ("swap", "blocks"): 0, ("swap", "src"): 1, ("swap", "dst"): 2,
        ("mark_accessed", "blocks"): 0, ("mark_accessed", "now"): 1,
        ("computed_block_ids", "blocks"): 1,
        ("computed_block_ids", "prev_computed"): 0,  # stale ids
        ("cached_prefix", "blocks"): 0, ("cached_prefix", "device"): "device",
        ("count_touched", "blocks"): 0, ("count_touched", "device"): 1,
        ("count_touched", "lookahead"): 2,
        ("count_full_touched", "blocks"): 0, ("count_full_touched", "device"): 1,
        ("hit_rate", "device"): 0, ("reset_prefix_cache", "device"): 0,
        ("table_allocate", "tokens"): 0, ("table_allocate", "device"): "device",
        ("table_allocate", "extra_hash"): "extra_hash",
        ("table_append", "tokens"): 0, ("table_append", "lookahead"): "num_lookahead_slots",
        ("table_ensure_slots", "slots"): 0, ("table_mark_accessed", "now"): 1,
        ("table_append", "extra_hash"): "extra_hash",  # the table's extra_hash
        ("table_ensure_slots", "extra_hash"): "extra_hash",
        # content hash: the parameters of ``hash_block_tokens``
        ("hash_recompute", "is_first_block"): 0, ("hash_recompute", "prev_block_hash"): 1,
        ("hash_recompute", "token_ids"): 2,
    }

    def _plan_malformed(self, op: ops.Malformed, tables: Mapping[int, Any]) -> Plan:
        """The plan of ``op.call`` with the argument's expression in its last call replaced
        by the literal ``op.bad`` (commented, so a reproducer shows which argument is bad)."""
        plan = self.plan(op.call, tables)
        last = plan.stmts[-1]
        call = last.expr
        # request keys: ``extra_hash.<field>`` is an argument of the key builder's call
        outer, dot, key_field = op.argument.partition(".")
        if dot:
            if outer != "extra_hash" or self.extra_key_function is None \
                    or not isinstance(call, Call):
                raise Unsupported(f"{op.call.kind}: no key builder call to malform")
            kwargs = dict(call.kwargs)
            builder = kwargs.get("extra_hash")
            if not isinstance(builder, Call):
                raise Unsupported(f"{op.call.kind} renders no request key")
            bad_kwargs = {**dict(builder.kwargs), key_field: _bad_literal(op.bad)}
            kwargs["extra_hash"] = Call(builder.func, builder.args, tuple(bad_kwargs.items()))
            plan.stmts[-1] = Stmt(Call(call.func, call.args, tuple(kwargs.items())),
                                  bind=last.bind, unpack=last.unpack,
                                  comment=f"malformed {op.argument}")
            return plan
        # end request keys
        slot = self.MALFORMED_SLOTS.get((op.call.kind, op.argument))
        if slot is None or not isinstance(call, Call) or (
                isinstance(slot, int) and slot > len(call.args)):
            raise Unsupported(f"{op.call.kind} has no argument {op.argument!r} to malform")
        bad = _bad_literal(op.bad)
        if isinstance(slot, int):
            args = [*call.args[:slot], bad, *call.args[slot + 1:]]
            call = Call(call.func, tuple(args), call.kwargs)
        else:
            kwargs = {**dict(call.kwargs), slot: bad}
            call = Call(call.func, call.args, tuple(kwargs.items()))
        plan.stmts[-1] = Stmt(call, bind=last.bind, unpack=last.unpack,
                              comment=f"malformed {op.argument}")
        return plan

    # ------------------------------------------------------------------ construction
    # ``Construct`` builds the target's own classes beside its allocator: the GPU allocator's
    # class (prefix-caching or naive), the naive class a prefix-caching one embeds
    # (``_hashless_allocator``, API.md 4) or the prefix-caching class of the package, the
    # ``NaiveBlock`` of the naive class's module, and the allocator's device-aware class (for
    # ``devices`` and ``create``). A class that is not importable by name is not found (a
    # reproducer could not build it); the machines and the decoder ask only for what
    # :meth:`construct_support` lists. The built allocator is bound to ``built``.

    def construct_support(self) -> frozenset[str]:
        """What ``Construct`` can build: ``"naive"``, ``"prefix_caching"``, ``"devices"`` (the
        device-aware class), ``"hash_function"`` (the prefix-caching class takes one)."""
        return frozenset(name for name in self._construct_classes() if name != "naive_block")

    @property
    def has_construct(self) -> bool:
        """Every class ``Construct`` needs but the hash-function extension (the decoder's
        feature: it never malforms ``hash_function``)."""
        return {"naive", "prefix_caching", "devices"} <= self.construct_support()

    def _construct_classes(self) -> dict[str, tuple[str, str]]:
        if "_construct_in" not in self.__dict__:
            self._construct_in = self._find_construct_classes()
        return self._construct_in

    def _find_construct_classes(self) -> dict[str, tuple[str, str]]:
        gpu = self._gpu_allocator()
        if gpu is None:
            return {}
        caching = getattr(gpu, "evictor", None) is not None
        found: dict[str, Any] = {"devices": type(self.alloc)}
        naive = getattr(gpu, "_hashless_allocator", None) if caching else gpu
        if naive is not None:
            found["naive"] = type(naive)
            found["naive_block"] = getattr(sys.modules.get(type(naive).__module__, None),
                                           "NaiveBlock", None)
        if caching:
            found["prefix_caching"] = type(gpu)
        else:
            package = type(self.alloc).__module__.rsplit(".", 1)[0]
            try:
                module = importlib.import_module(f"{package}.prefix_caching_block")
            except ImportError:
                module = None
            found["prefix_caching"] = getattr(module, "PrefixCachingBlockAllocator", None)
        out: dict[str, tuple[str, str]] = {}
        for name, cls in found.items():
            module_name, attr = getattr(cls, "__module__", ""), getattr(cls, "__name__", "")
            if isinstance(cls, type) and getattr(sys.modules.get(module_name), attr, None) is cls:
                out[name] = (module_name, attr)
        if "naive_block" not in out:
            out.pop("naive", None)
        if not callable(getattr(found["devices"], "create", None)):
            out.pop("devices", None)
        if "prefix_caching" in out and "hash_function" in inspect.signature(
                found["prefix_caching"]).parameters:
            out["hash_function"] = out["prefix_caching"]
        return out

    def _construct_cls(self, name: str) -> Attr:
        found = self._construct_classes().get(name)
        if found is None:
            raise Unsupported(f"the target has no {name} class to construct")
        module_name, attr = found
        module = Call(Name("__import__"), (Lit(module_name),), (("fromlist", Lit(["_"])),))
        return Attr(module, attr)

    def _construct_one(self, op: ops.Construct, ids: tuple[int, ...], bind: str,
                       replaced: str) -> Stmt:
        """``bind = <allocator>(...)`` over ``ids``, its argument ``replaced`` (if any) being
        ``op.bad``."""
        bad = _bad_literal(op.bad)
        n: Expr = bad if replaced == "num_blocks" else Lit(len(ids))
        size: Expr = bad if replaced == "block_size" else Lit(self.block_size)
        kwargs: list[tuple[str, Expr]] = [
            ("block_ids", bad if replaced == "block_ids" else Lit(list(ids)))]
        if not op.argument and ids == tuple(range(len(ids))):  # default ids
            kwargs = []  # API.md 4: block_ids defaults to range(num_blocks)
        args: tuple[Expr, ...]
        if op.allocator == "naive":
            func, args = self._construct_cls("naive"), (self._construct_cls("naive_block"), n,
                                                        size)
        else:
            func, args = self._construct_cls("prefix_caching"), (n, size)
            if replaced == "hash_function":
                self._construct_cls(replaced)  # an extension: only where it is detected
            if replaced in ("eviction_policy", "hash_function"):
                kwargs.append((replaced, bad))
        return Stmt(Call(func, args, tuple(kwargs)), bind=bind,
                    comment=f"malformed {replaced}" if replaced else "")

    def _plan_construct(self, op: ops.Construct, _: Any) -> Plan:
        if op.argument == "allocator_type":
            call = Call(Attr(self._construct_cls("devices"), "create"), (
                _bad_literal(op.bad), Lit(len(op.ids)), Lit(len(op.cpu_ids)),
                Lit(self.block_size)))
            return Plan([Stmt(call, bind="built", comment="malformed allocator_type")])
        own = "" if op.argument.startswith("cpu_") else op.argument
        if op.create:  # the device-aware class's own factory numbers the ids
            stmts = [Stmt(Call(Attr(self._construct_cls("devices"), "create"), (
                Lit(op.allocator), Lit(len(op.ids)), Lit(len(op.cpu_ids)),
                Lit(self.block_size))), bind="built")]
            devs: list[tuple[Dev | None, tuple[int, ...]]] = [(Dev.GPU, op.ids),
                                                              (Dev.CPU, op.cpu_ids)]
        elif not op.devices:
            stmts = [self._construct_one(op, op.ids, "built", own)]
            devs = [(None, op.ids)]
        else:
            cpu_ids = "block_ids" if op.argument == "cpu_block_ids" else ""
            cpu = "built_gpu" if op.argument == "cpu_block_allocator" else "built_cpu"
            stmts = [self._construct_one(op, op.ids, "built_gpu", own),
                     self._construct_one(op, op.cpu_ids, "built_cpu", cpu_ids),
                     Stmt(Call(self._construct_cls("devices"), (), (
                         ("cpu_block_allocator", Name(cpu)),
                         ("gpu_block_allocator", Name("built_gpu")))), bind="built",
                         comment="the GPU allocator twice" if cpu == "built_gpu" else "")]
            devs = [(Dev.GPU, op.ids), (Dev.CPU, op.cpu_ids)]
        if op.argument:
            return Plan(stmts)  # only the constructors: they must refuse it
        reads: list[tuple[str, Stmt]] = []
        on = [(self.device(d),) if d is not None else () for d, _ in devs]
        reads += [("total", Stmt(method("built", "get_num_total_blocks", *d))) for d in on]
        reads += [("free", Stmt(method("built", "get_num_free_blocks", *d))) for d in on]
        reads.append(("all", Stmt(Attr(Name("built"), "all_block_ids"))))
        for d, (_, ids) in zip(on, devs, strict=True):
            reads += [("physical", Stmt(method("built", "get_physical_block_id", *d, Lit(i))))
                      for i in ids]
        for d, (_, ids) in zip(on, devs, strict=True):
            kw = {"device": d[0]} if d else {}
            reads += [("handed", Stmt(method("built", "allocate_mutable_block", Lit(None), **kw)))
                      for _ in ids]
        reads += [("free_after", Stmt(method("built", "get_num_free_blocks", *d))) for d in on]
        start, keys = len(stmts), [key for key, _ in reads]

        def value(r: list[Any]) -> dict[str, list[int]]:
            out: dict[str, list[int]] = {key: [] for key in (
                "total", "free", "all", "physical", "handed", "free_after")}
            for key, got in zip(keys, r[start:], strict=True):
                if key == "all":
                    out[key] = sorted(checked_id_set(got, "built.all_block_ids"))
                elif key == "handed":
                    out[key].append(checked_int(checked_block(
                        got, "built.allocate_mutable_block").block_id, "block.block_id"))
                else:
                    out[key].append(checked_int(got, f"built ({key})"))
            return out

        return Plan([*stmts, *(stmt for _, stmt in reads)], value=value)

    # ------------------------------------------------------------------ end construction

    # ------------------------------------------------------------------ injected hash
    # ``InjectedHash`` builds the device-aware class through its own ``create`` with
    # ``hash_function=models.families.v0.injected_hash.injected_hash`` (an extension: only where
    # ``create`` takes ``hash_function``; vLLM 0.8's does not).

    @property
    def has_injected_hash(self) -> bool:
        """The device-aware class's ``create`` takes ``hash_function``."""
        found = self._construct_classes().get("devices")
        if found is None:
            return False
        cls: Any = getattr(sys.modules.get(found[0]), found[1], None)
        try:
            params = inspect.signature(cls.create).parameters
        except (AttributeError, TypeError, ValueError):
            return False
        return "hash_function" in params

    def _plan_injected_hash(self, op: ops.InjectedHash, _: Any) -> Plan:
        if not self.has_injected_hash:
            raise Unsupported("the target's create takes no hash_function")
        injected = Attr(Call(Name("__import__"), (Lit("models.families.v0.injected_hash"),),
                             (("fromlist", Lit(["_"])),)), "injected_hash")
        stmts = [Stmt(Call(Attr(self._construct_cls("devices"), "create"), (
            Lit("prefix_caching"), Lit(4), Lit(4), Lit(self.block_size)),
            (("hash_function", injected),)), bind="hashed", comment="injected hash_function")]
        for dev in Dev:
            d, p = self.device(dev), f"ih_{dev.value}_"
            stmts += [
                Stmt(method("hashed", "allocate_immutable_block", Lit(None), _tokens(op.tokens),
                            device=d), bind=p + "x"),
                Stmt(method("hashed", "allocate_immutable_block", Lit(None),
                            _tokens(op.permuted), device=d), bind=p + "y"),
                Stmt(method("hashed", "allocate_mutable_block", Lit(None), device=d),
                     bind=p + "z"),
                Stmt(method(p + "z", "append_token_ids", _tokens(op.permuted))),
                Stmt(method("hashed", "allocate_immutable_blocks", Lit(None),
                            Lit([list(op.permuted), list(op.tail)]), device=d),
                     unpack=(p + "c0", p + "c1")),
                *(Stmt(Attr(Name(p + n), "content_hash")) for n in ("x", "z", "c1")),
                *(Stmt(Attr(Name(p + n), "block_id")) for n in ("x", "y", "z", "c0")),
            ]
        per_device = 12  # statements per device; the last seven are the read-outs

        def value(r: list[Any]) -> dict[str, list[list[int | None]]]:
            out: dict[str, list[list[int | None]]] = {"hashes": [], "ids": []}
            for k in range(len(Dev)):
                reads = r[1 + k * per_device + 5:1 + (k + 1) * per_device]
                out["hashes"].append([checked_opt_int(h, "block.content_hash")
                                      for h in reads[:3]])
                out["ids"].append([checked_opt_int(i, "block.block_id") for i in reads[3:]])
            return out

        return Plan(stmts, value=value)

    # ------------------------------------------------------------------ end injected hash

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

    def block_total(self, obj: Any) -> int:
        """A prefix-caching block object's ``num_tokens_total``, type-checked."""
        total = obj.num_tokens_total
        return total if type(total) is int else checked_int(total, "block.num_tokens_total")

    def block_extra(self, obj: Any) -> int | None:
        """A block object's ``extra_hash`` property (vLLM generation), type-checked."""
        return checked_opt_int(obj.extra_hash, "block.extra_hash")

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

    # ------------------------------------------------------------------ hit-rate windows

    def metric_windows(self) -> dict[Dev, tuple[object, ...]] | None:
        """Per device whose allocator has a ``metric_data`` with every window field
        (``models.families.v0.hit_window.FIELDS``), those fields; None when no allocator shows
        them."""
        subs = getattr(self.alloc, "_allocators", None)
        if not isinstance(subs, Mapping):
            return None
        shown: dict[Dev, tuple[object, ...]] = {}
        for dev in Dev:
            metric = getattr(subs.get(getattr(self.device_enum, dev.name)), "metric_data", None)
            if metric is not None and all(hasattr(metric, name) for name in WINDOW_FIELDS):
                shown[dev] = tuple(getattr(metric, name) for name in WINDOW_FIELDS)
        return shown or None

    # ------------------------------------------------------------------ end hit-rate windows

    # ------------------------------------------------------------------ evictor level
    # ``EVICTOR_OPS`` drive a fresh instance of the evictor class the GPU prefix-caching
    # allocator uses (a detected capability: none without one), named ``evictor`` in the plans.
    # The first evictor operation of a program builds it: ``make_evictor(EvictionPolicy.LRU)``
    # of that class's module when it yields that class, else the class called with no arguments.

    def evictor_factory(self) -> tuple[str, str] | None:
        """(module, ``"make_evictor"`` or the class name) of the target's evictor, or None."""
        if "_evictor_in" not in self.__dict__:
            self._evictor_in = self._find_evictor_factory()
            self._evictor_made = False
        return self._evictor_in

    @property
    def has_evictor(self) -> bool:
        return self.evictor_factory() is not None

    def _find_evictor_factory(self) -> tuple[str, str] | None:
        evictor = getattr(self._gpu_allocator(), "evictor", None)
        if evictor is None:
            return None
        cls = type(evictor)
        module = sys.modules.get(cls.__module__)
        make = getattr(module, "make_evictor", None)
        policy = getattr(getattr(module, "EvictionPolicy", None), "LRU", None)
        if callable(make) and policy is not None and type(make(policy)) is cls:
            return cls.__module__, "make_evictor"
        if getattr(module, cls.__name__, None) is not cls:
            return None  # not importable by name: a reproducer could not build it
        return cls.__module__, cls.__name__

    def _evictor(self) -> list[Stmt]:
        """The statement building ``evictor``, for the program's first evictor operation."""
        found = self.evictor_factory()
        if found is None:
            raise Unsupported("the target's GPU allocator has no evictor")
        if self._evictor_made:
            return []
        self._evictor_made = True
        module_name, name = found
        module = Call(Name("__import__"), (Lit(module_name),), (("fromlist", Lit(["_"])),))
        args = (Attr(Attr(module, "EvictionPolicy"), "LRU"),) if name == "make_evictor" else ()
        return [Stmt(Call(Attr(module, name), args), bind="evictor")]

    def _plan_evictor_add(self, op: ops.EvictorAdd, _: Any) -> Plan:
        call = method("evictor", "add", Lit(op.block_id), Lit(op.content_hash),
                      Lit(op.num_hashed_tokens), Lit(op.last_accessed))
        return Plan([*self._evictor(), Stmt(call)])

    def _plan_evictor_update(self, op: ops.EvictorUpdate, _: Any) -> Plan:
        call = method("evictor", "update", Lit(op.block_id), Lit(op.last_accessed))
        return Plan([*self._evictor(), Stmt(call)])

    def _plan_evictor_remove(self, op: ops.EvictorRemove, _: Any) -> Plan:
        return Plan([*self._evictor(), Stmt(method("evictor", "remove", Lit(op.block_id)))])

    def _plan_evictor_evict(self, op: ops.EvictorEvict, _: Any) -> Plan:
        def value(r: list[Any]) -> list[int]:
            got = r[-1]
            if not isinstance(got, tuple | list) or len(got) != 2 or not all(map(is_int, got)):
                raise wrong_type("evictor.evict", "(int, int)", got)
            return [int(got[0]), int(got[1])]

        return Plan([*self._evictor(), Stmt(method("evictor", "evict"))], value=value)

    def _plan_evictor_contains(self, op: ops.EvictorContains, _: Any) -> Plan:
        made = self._evictor()
        stmts = [*made, *(Stmt(method("evictor", "__contains__", Lit(i))) for i in op.ids)]
        return Plan(stmts, value=lambda r: [
            checked_bool(x, "evictor.__contains__") for x in r[len(made):]])

    def evictor_state(self, evictor: Any) -> ops.EvictorState:
        """``num_blocks`` and ``free_table`` of ``evictor``, type-checked."""
        count = checked_int(evictor.num_blocks, "evictor.num_blocks")
        table = evictor.free_table
        if not isinstance(table, Mapping):
            raise wrong_type("evictor.free_table", "dict of int -> BlockMetaData", table)
        shown_table: dict[int, tuple[int, int, float]] = {}
        for block_id, meta in table.items():
            what = f"evictor.free_table[{block_id!r}]"
            shown_table[checked_int(block_id, "evictor.free_table (a key)")] = (
                checked_int(meta.content_hash, f"{what}.content_hash"),
                checked_int(meta.num_hashed_tokens, f"{what}.num_hashed_tokens"),
                checked_number(meta.last_accessed, f"{what}.last_accessed"))
        return ops.EvictorState(count, shown_table)

    # ------------------------------------------------------------------ end evictor level

    # ------------------------------------------------------------------ refcount level
    # ``REFCOUNT_OPS`` drive fresh instances of the classes of the GPU allocator's
    # ``_refcounter`` (a full counter: it has ``as_readonly``) and ``_cow_tracker`` (a detected
    # capability: none without both, or when a class is not importable by name). ``RefNew``
    # binds ``refcounter``, ``refcount_view`` (``as_readonly()``) and ``cow_tracker`` (over
    # the view, as the allocators build theirs); the snapshot reads ``get`` of the ids it named.

    def refcount_classes(self) -> tuple[tuple[str, str], tuple[str, str]] | None:
        """(module, class name) of the target's counter and of its CoW tracker, or None."""
        if "_refcount_in" not in self.__dict__:
            self._refcount_in = self._find_refcount_classes()
            self.refcount_ids: tuple[int, ...] = ()
        return self._refcount_in

    @property
    def has_refcount(self) -> bool:
        return self.refcount_classes() is not None

    def _find_refcount_classes(self) -> tuple[tuple[str, str], tuple[str, str]] | None:
        gpu = self._gpu_allocator()
        counter = getattr(gpu, "_refcounter", None)
        tracker = getattr(gpu, "_cow_tracker", None)
        needs = ((counter, ("incr", "decr", "get", "as_readonly")),
                 (tracker, ("is_appendable", "record_cow", "clear_cows")))
        found: list[tuple[str, str]] = []
        for obj, names in needs:
            cls = type(obj)
            if obj is None or not all(callable(getattr(obj, n, None)) for n in names) \
                    or getattr(sys.modules.get(cls.__module__), cls.__name__, None) is not cls:
                return None  # missing, or not importable by name (a reproducer could not build it)
            found.append((cls.__module__, cls.__name__))
        return found[0], found[1]

    def _refcount_classes(self) -> tuple[tuple[str, str], tuple[str, str]]:
        found = self.refcount_classes()
        if found is None:
            raise Unsupported("the target's GPU allocator has no RefCounter/CopyOnWriteTracker")
        return found

    @staticmethod
    def _class_expr(module_name: str, name: str) -> Attr:
        module = Call(Name("__import__"), (Lit(module_name),), (("fromlist", Lit(["_"])),))
        return Attr(module, name)

    def _plan_ref_new(self, op: ops.RefNew, _: Any) -> Plan:
        (counter_mod, counter_cls), (cow_mod, cow_cls) = self._refcount_classes()
        self.refcount_ids = tuple(sorted(set(op.ids)))
        return Plan([
            Stmt(Call(self._class_expr(counter_mod, counter_cls), (Lit(list(op.ids)),)),
                 bind="refcounter"),
            Stmt(method("refcounter", "as_readonly"), bind="refcount_view"),
            Stmt(Call(self._class_expr(cow_mod, cow_cls), (Name("refcount_view"),)),
                 bind="cow_tracker")])

    def _plan_counter(self, name: str, op: ops.RefIncr | ops.RefDecr | ops.RefGet) -> Plan:
        self._refcount_classes()
        obj = "refcount_view" if op.readonly else "refcounter"
        return Plan([Stmt(method(obj, name, Lit(op.block_id)))],
                    value=lambda r: checked_int(r[-1], f"{obj}.{name}"))

    def _plan_ref_incr(self, op: ops.RefIncr, _: Any) -> Plan:
        return self._plan_counter("incr", op)

    def _plan_ref_decr(self, op: ops.RefDecr, _: Any) -> Plan:
        return self._plan_counter("decr", op)

    def _plan_ref_get(self, op: ops.RefGet, _: Any) -> Plan:
        return self._plan_counter("get", op)

    def _plan_cow_appendable(self, op: ops.CowAppendable, _: Any) -> Plan:
        self._refcount_classes()
        stand_in = Call(self._class_expr(__name__, "IdOnlyBlock"), (Lit(op.block_id),))
        return Plan([Stmt(method("cow_tracker", "is_appendable", stand_in))],
                    value=lambda r: checked_bool(r[-1], "cow_tracker.is_appendable"))

    def _plan_cow_record(self, op: ops.CowRecord, _: Any) -> Plan:
        self._refcount_classes()
        return Plan([Stmt(method("cow_tracker", "record_cow", Lit(op.src_id),
                                 Lit(op.dst_id)))])

    def _plan_cow_clear(self, op: ops.CowClear, _: Any) -> Plan:
        self._refcount_classes()
        return Plan([Stmt(method("cow_tracker", "clear_cows"))],
                    value=lambda r: checked_pairs(r[-1], "cow_tracker.clear_cows"))

    def refcount_state(self, counter: Any, tracker: Any) -> ops.RefcountState:
        """``get`` of every id ``RefNew`` named, and the tracker's ``pending()`` where it has
        one; type-checked."""
        self.refcount_classes()
        counts = {i: checked_int(counter.get(i), f"refcounter.get({i})")
                  for i in self.refcount_ids}
        pending = None
        if callable(getattr(tracker, "pending", None)):  # an extension: not every tracker has it
            pairs = tracker.pending()
            if type(pairs) is not list or not all(
                    isinstance(p, tuple | list) and len(p) == 2 for p in pairs):
                raise wrong_type("cow_tracker.pending", "list of pairs", pairs)
            # A ``None`` id is shown as recorded (the model judges it), not as a wrong type.
            pending = tuple((checked_opt_int(p[0], "cow_tracker.pending"),
                             checked_opt_int(p[1], "cow_tracker.pending")) for p in pairs)
        return ops.RefcountState(counts, pending)

    # ------------------------------------------------------------------ end refcount level

    # ------------------------------------------------------------------ device calls
    # ``DEVICE_OPS`` call one device's own allocator, ``alloc._allocators[Device.X]`` (bound
    # as ``gpu_allocator`` / ``cpu_allocator``): a detected capability (both devices'
    # allocators with ``swap_out`` and ``swap_in``); ``free_block_id`` (vLLM-generation naive
    # allocators) and the factory ``create`` are detected on their own.

    @property
    def has_device_calls(self) -> bool:
        subs = getattr(self.alloc, "_allocators", None)
        if not isinstance(subs, Mapping):
            return False
        allocators = [subs.get(getattr(self.device_enum, dev.name)) for dev in Dev]
        return all(callable(getattr(a, name, None)) for a in allocators
                   for name in ("swap_out", "swap_in"))

    @property
    def has_free_block_id(self) -> bool:
        return self.has_device_calls and callable(
            getattr(self._gpu_allocator(), "free_block_id", None))

    @property
    def has_create(self) -> bool:
        """The allocator's class has the factory ``create`` (another allocator can be made)."""
        return callable(getattr(type(self.alloc), "create", None))

    def _on(self, dev: Dev) -> tuple[Stmt, Name]:
        if not self.has_device_calls:
            raise Unsupported("the target exposes no per-device allocators")
        name = f"{dev.value}_allocator"
        get = method(Attr(Name("alloc"), "_allocators"), "__getitem__", self.device(dev))
        return Stmt(get, bind=name), Name(name)

    def _plan_device_swap(self, op: ops.DeviceSwap, _: Any) -> Plan:
        src_stmt, src = self._on(op.src)
        dst_stmt, dst = self._on(op.dst)
        ids = ListOf(tuple(Attr(block(h), "block_id") for h in op.blocks))
        module = Call(Name("__import__"), (Lit(__name__),), (("fromlist", Lit(["_"])),))
        swap = Call(Attr(module, "swap_by_hand"),
                    (src, dst, ListOf(tuple(block(h) for h in op.blocks))))

        def value(r: list[Any]) -> dict[str, Any]:
            before = [checked_opt_int(i, "block.block_id") for i in r[2]]
            after = [checked_opt_int(i, "block.block_id") for i in r[4]]
            return {"pairs": [[a, b] for a, b in zip(before, after, strict=True)],
                    "swapped": checked_bool(r[3], "swap_by_hand")}

        return Plan([src_stmt, dst_stmt, Stmt(ids, bind="ids_before"),
                     Stmt(swap, bind="swapped"), Stmt(ids)], value=value)

    def _plan_device_swap_misuse(self, op: ops.DeviceSwapMisuse, _: Any) -> Plan:
        get, dev = self._on(op.device)
        blocks = ListOf(tuple(block(h) for h in op.blocks))
        call = {"swap_in_held": method(dev, "swap_in", blocks),
                "swap_out_foreign": method(dev, "swap_out", blocks),
                "free_foreign": method(dev, "free", block(op.blocks[0]))}.get(op.action)
        if call is None:
            raise Unsupported(f"unknown device swap misuse {op.action!r}")
        return Plan([get, Stmt(call)])

    def _plan_device_misuse(self, op: ops.DeviceMisuse, _: Any) -> Plan:
        get, dev = self._on(op.device)
        block_id = Lit(op.block_id)
        if op.action == "device_argument":
            return Plan([get, Stmt(method(dev, "allocate_mutable_block", Lit(None),
                                          device=self.device(op.device)))])
        if op.action in ("device_argument_immutable", "device_argument_chain"):
            full = Lit([0] * self.block_size)
            call = method(dev, "allocate_immutable_block", Lit(None), full,
                          device=self.device(op.device)) \
                if op.action == "device_argument_immutable" else \
                method(dev, "allocate_immutable_blocks", Lit(None), Lit([[0] * self.block_size]),
                       device=self.device(op.device))
            return Plan([get, Stmt(call)])
        if op.action == "physical_unknown":
            return Plan([get, Stmt(method(dev, "get_physical_block_id", block_id))])
        if op.action in ("refcount_unknown", "device_unknown"):
            if not self.has_block_info:
                raise Unsupported("get_block_refcount/get_block_device are not in this target")
            name = "get_block_refcount" if op.action == "refcount_unknown" \
                else "get_block_device"
            return Plan([Stmt(method("alloc", name, block_id))])
        if op.action == "free_id_twice":
            if not self.has_free_block_id:
                raise Unsupported("the target's device allocators have no free_block_id")
            return Plan([get, Stmt(method(dev, "free_block_id", block_id))])
        if op.action == "free_foreign_allocator":
            if not self.has_create:
                raise Unsupported("the target's class has no create")
            create = method(Attr(Name("alloc"), "__class__"), "create", Lit("naive"), Lit(1),
                            Lit(0), Lit(self.block_size))
            foreign = method("other_alloc", "allocate_mutable_block", Lit(None),
                             device=self.device(Dev.GPU))
            return Plan([Stmt(create, bind="other_alloc"), Stmt(foreign, bind="foreign_block"),
                         Stmt(method("other_alloc", "free", Name("foreign_block"))),
                         Stmt(method("alloc", "free", Name("foreign_block")))])
        if op.action == "swap_in_oversized":  # a full block of another allocator, 2x as big
            if not self.has_create:
                raise Unsupported("the target's class has no create")
            size = 2 * self.block_size
            create = method(Attr(Name("alloc"), "__class__"), "create", Lit("naive"), Lit(1),
                            Lit(0), Lit(size))
            big = method("other_alloc", "allocate_immutable_block", Lit(None), Lit([0] * size),
                         device=self.device(Dev.GPU))
            out = method(method(Attr(Name("other_alloc"), "_allocators"), "__getitem__",
                                self.device(Dev.GPU)), "swap_out", ListOf((Name("big_block"),)))
            return Plan([Stmt(create, bind="other_alloc"), Stmt(big, bind="big_block"),
                         Stmt(out), get,
                         Stmt(method(dev, "swap_in", ListOf((Name("big_block"),))))])
        raise Unsupported(f"unknown device misuse {op.action!r}")

    def _plan_device_free_id(self, op: ops.DeviceFreeId, _: Any) -> Plan:
        if not self.has_free_block_id:
            raise Unsupported("the target's device allocators have no free_block_id")
        get, dev = self._on(op.device)
        b = block(op.block)
        return Plan([get, Stmt(method(dev, "free_block_id", Attr(b, "block_id"))),
                     Stmt(Call(Name("setattr"), (b, Lit("block_id"), Lit(None))))])

    # ------------------------------------------------------------------ end device calls



# --------------------------------------------------------------------------- engine-side


def sequence_extra_hash(lora_int_id: int, prompt_adapter_id: int = 0) -> int | None:
    """vLLM 0.8's ``Sequence.extra_hash()``: ``None`` without LoRA or prompt adapter, else
    Python's ``hash`` of the pair (stable: ints hash without ``PYTHONHASHSEED``)."""
    if prompt_adapter_id == 0 and lora_int_id == 0:
        return None
    return hash((prompt_adapter_id, lora_int_id))


class IdOnlyBlock:
    """The least of a block ``CopyOnWriteTracker.is_appendable`` reads: ``block_id``
    (refcount level)."""

    def __init__(self, block_id: int | None) -> None:
        self.block_id = block_id

    def __repr__(self) -> str:
        return f"IdOnlyBlock({self.block_id!r})"


# device calls: a custom swapper over two device allocators (``DeviceSwap``)


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


# end device calls


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
