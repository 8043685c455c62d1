"""The adapter's core: capability detection, the plan environment and dispatch.

:class:`AdapterCore` holds what every operation group shares: the live allocator, the
capabilities detected from its API at construction (API generation, ``extra_hash``, the
extra-key function, block queries, ``hash_block_tokens``), the names a plan may use
(:meth:`AdapterCore.env`), device and request-key expressions, the per-device allocators,
error classification, and :meth:`AdapterCore.plan`, which dispatches an operation to the
``_plan_<kind>`` method of the group module defining it (``adapter/<group>.py``, a mixin of
:class:`~properties.families.v0.adapter.FamilyAdapter`). ``sequence_extra_hash`` is vLLM 0.8's
engine-side key of a request, for targets without an extra-key function.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from models.families.v0 import operations as ops
from models.families.v0.operations import DEVICES, Dev, ErrorKind, Op
from properties.core.calls import Attr, Call, Expr, ListOf, Lit, Name, Stmt, method
from properties.families.v0.adapter.plan import PACKAGE, Plan, block
from properties.families.v0.adapter.values import Unsupported, wrong_type

#: The request keys a target's own key builder folds in (``Capabilities.extra_key_fields``).
KEY_FIELDS = frozenset({"lora", "salt", "mm", "bytes"})


class AdapterCore:
    """Adapter core for ``DeviceAwareBlockAllocator``-compatible allocators.

    ``alloc`` is a live allocator; ``block_size`` its block size. Generation differences are
    detected from the methods the allocator has. ``extra_key_function`` (``module:callable``,
    a target's claim) renders :class:`~models.families.v0.operations.ExtraKey` values; see
    :meth:`_detect_extra_keys` for the default. ``plan(op, ...)`` calls ``_plan_<op.kind>``.
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
        self._members: dict[Dev, Any] = {}  # Dev -> the target's Device member (``member``)

    def env(self) -> dict[str, Any]:
        """Names a plan may use besides block and table handles."""
        return {"alloc": self.alloc, "Device": self.device_enum, "BlockTable": self.block_table_cls,
                "__import__": __import__,  # engine-side plans import the trackers
                "setattr": setattr}  # writes to the null block's properties

    def member(self, dev: Dev) -> Any:
        """The target's ``Device`` member for ``dev`` (looked up once; every snapshot reads
        each device's free count and private state)."""
        found = self._members.get(dev)
        if found is None:
            found = self._members[dev] = getattr(self.device_enum, dev.name)
        return found

    def device(self, dev: Dev) -> Attr:
        return Attr(Name("Device"), dev.name)

    def _extra(self, extra_hash: ops.Extra) -> dict[str, Expr]:
        if extra_hash is None:
            return {}
        return {"extra_hash": self._extra_expr(extra_hash)}

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
            module_name, name = PACKAGE, "sequence_extra_hash"
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

    def plan(self, op: Op, table_extra: Mapping[int, ops.Extra]) -> Plan:
        """The call plan for ``op``; ``table_extra`` is each live table's extra_hash."""
        handler = getattr(self, f"_plan_{op.kind}", None)
        if handler is None:
            raise Unsupported(f"no plan for {op.kind}")
        plan: Plan = handler(op, table_extra)
        return plan

    def _ids(self, handles: Sequence[int]) -> ListOf:
        """``[b<h>.block_id, ...]``: the ids the handles' blocks hold when the call runs."""
        return ListOf(tuple(Attr(block(h), "block_id") for h in handles))

    def _gpu_allocator(self) -> object | None:
        """The target's GPU allocator (vLLM/Aphrodite ``CpuGpuBlockAllocator._allocators``),
        or None when the target does not expose one."""
        subs = getattr(self.alloc, "_allocators", None)
        return subs.get(self.device_enum.GPU) if isinstance(subs, Mapping) else None

    @property
    def has_device_calls(self) -> bool:
        """Both devices' allocators (``alloc._allocators``) have ``swap_out`` and ``swap_in``
        (``DEVICE_OPS``, ``DeviceSwap``, the null block's device misuse)."""
        subs = getattr(self.alloc, "_allocators", None)
        if not isinstance(subs, Mapping):
            return False
        allocators = [subs.get(getattr(self.device_enum, dev.name)) for dev in DEVICES]
        return all(callable(getattr(a, name, None)) for a in allocators
                   for name in ("swap_out", "swap_in"))

    def _on(self, dev: Dev) -> tuple[Stmt, Name]:
        """The statement binding ``<dev>_allocator`` (that device's own allocator), and
        its name."""
        if not self.has_device_calls:
            raise Unsupported("the target exposes no per-device allocators")
        name = f"{dev.value}_allocator"
        get = method(Attr(Name("alloc"), "_allocators"), "__getitem__", self.device(dev))
        return Stmt(get, bind=name), Name(name)

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


def sequence_extra_hash(lora_int_id: int, prompt_adapter_id: int = 0) -> int | None:
    """vLLM 0.8's ``Sequence.extra_hash()``: ``None`` without LoRA or prompt adapter, else
    Python's ``hash`` of the pair (stable: ints hash without ``PYTHONHASHSEED``)."""
    if prompt_adapter_id == 0 and lora_int_id == 0:
        return None
    return hash((prompt_adapter_id, lora_int_id))
