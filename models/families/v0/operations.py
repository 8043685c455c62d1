"""The operation vocabulary, defined once for the model, the state machines, the fuzz decoder
and trace replay.

A *program* is a sequence of operations. Operations never name physical block ids: they name
*handles*, small integers that the runner hands out in creation order, so the same program
replays against any allocator.

- A **block handle** names one block object. Handles are numbered from 0 across the whole
  program; every operation that creates blocks (``AllocateMutable``, ``AllocateImmutable``,
  ``AllocateImmutableChain``, ``Fork``) creates its handles, in chain order, only if it succeeds.
- A **table handle** names one ``BlockTable``; ``TableAllocate`` and ``TableFork`` create them.

After each operation the runner reports an :class:`Outcome` (what the call returned or raised)
and a :class:`Snapshot` (what the allocator now shows); the model judges the pair.
Everything here is plain data that round-trips through JSON (:func:`op_to_json`,
:func:`op_from_json`), which is what traces, crash files and reproducers store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from models.families.v0.ops.allocate import (
    AllocateImmutable,
    AllocateImmutableChain,
    AllocateMutable,
)
from models.families.v0.ops.append import Append
from models.families.v0.ops.base import Arg, Op, Out
from models.families.v0.ops.construction import CONSTRUCT_ALLOCATORS, Construct
from models.families.v0.ops.device import (
    DEVICE_MISUSES,
    DEVICE_SWAP_MISUSES,
    DeviceFreeId,
    DeviceMisuse,
    DeviceSwapMisuse,
)
from models.families.v0.ops.fork import Fork
from models.families.v0.ops.free import Free
from models.families.v0.ops.hashing import AllocateImmutableIntLike, HashRecompute, InjectedHash
from models.families.v0.ops.malformed import Malformed
from models.families.v0.ops.marks import MarkAccessed, MarkComputed, MarkStaleIds
from models.families.v0.ops.null_block import (
    NULL_BLOCK_MISUSES,
    NULL_BLOCK_WRITES,
    GetNullBlock,
    NullBlockMisuse,
    NullBlockQuery,
)
from models.families.v0.ops.queries import (
    BlockInfo,
    CachedPrefix,
    ClearCopyOnWrites,
    ComputedBlockIds,
    CountFullTouched,
    CountTouched,
    HitRate,
    ResetPrefixCache,
)
from models.families.v0.ops.swap import DeviceSwap, Swap, TableSwap
from models.families.v0.ops.table_queries import IdSpace, SwapLog, TableReallocate, TableSlots
from models.families.v0.ops.tables import (
    TableAllocate,
    TableAppend,
    TableEnsureSlots,
    TableFork,
    TableFree,
    TableFreeBlock,
    TableMarkAccessed,
)
from models.families.v0.ops.tracker_misuse import (
    TRACKERS,
    SeqCachedTokensUnsized,
    SeqLostBlocks,
    SeqTrackerEdit,
)
from models.families.v0.ops.trackers import (
    ENGINE_OPS,
    CommonComputedIds,
    HitBurst,
    SeqAccess,
    SeqCachedTokens,
    SeqComputedIds,
    SeqStampBlocks,
    SeqTrack,
    SeqUntrack,
    TrackerStart,
)
from models.families.v0.ops.values import (
    DEVICES,
    JSON,
    Dev,
    ErrorKind,
    EvictorState,
    Extra,
    ExtraKey,
    KeyIdentity,
    Outcome,
    RefcountState,
    Snapshot,
    Tokens,
    extra_from_json,
    extra_to_json,
    frozen_literal,
)

__all__ = [
    "CONSTRUCT_ALLOCATORS",
    "DEVICES",
    "DEVICE_MISUSES",
    "DEVICE_SWAP_MISUSES",
    "ENGINE_OPS",
    "JSON",
    "NULL_BLOCK_MISUSES",
    "NULL_BLOCK_WRITES",
    "TRACKERS",
    "AllocateImmutable",
    "AllocateImmutableChain",
    "AllocateImmutableIntLike",
    "AllocateMutable",
    "Append",
    "Arg",
    "BlockInfo",
    "CachedPrefix",
    "ClearCopyOnWrites",
    "CommonComputedIds",
    "ComputedBlockIds",
    "Construct",
    "CountFullTouched",
    "CountTouched",
    "Dev",
    "DeviceFreeId",
    "DeviceMisuse",
    "DeviceSwap",
    "DeviceSwapMisuse",
    "ErrorKind",
    "EvictorState",
    "Extra",
    "ExtraKey",
    "Fork",
    "Free",
    "GetNullBlock",
    "HashRecompute",
    "HitBurst",
    "HitRate",
    "IdSpace",
    "InjectedHash",
    "KeyIdentity",
    "Malformed",
    "MarkAccessed",
    "MarkComputed",
    "MarkStaleIds",
    "NullBlockMisuse",
    "NullBlockQuery",
    "Op",
    "Out",
    "Outcome",
    "RefcountState",
    "ResetPrefixCache",
    "SeqAccess",
    "SeqCachedTokens",
    "SeqCachedTokensUnsized",
    "SeqComputedIds",
    "SeqLostBlocks",
    "SeqStampBlocks",
    "SeqTrack",
    "SeqTrackerEdit",
    "SeqUntrack",
    "Snapshot",
    "Swap",
    "SwapLog",
    "TableAllocate",
    "TableAppend",
    "TableEnsureSlots",
    "TableFork",
    "TableFree",
    "TableFreeBlock",
    "TableMarkAccessed",
    "TableReallocate",
    "TableSlots",
    "TableSwap",
    "Tokens",
    "TrackerStart",
    "extra_from_json",
    "extra_to_json",
    "frozen_literal",
]

# --------------------------------------------------------------------------- block level



















# --------------------------------------------------------------------------- engine-side
# What an engine's block manager asks besides the allocator calls above: the common computed
# prefix of a batch, bursts of cache queries (the hit-rate window), and the per-sequence
# trackers of ``prefix_caching_block`` (``models.families.v0.ops.trackers``: ``ENGINE_OPS``).
# --------------------------------------------------------------------------- end engine-side


# --------------------------------------------------------------------------- sequence level









# --------------------------------------------------------------------------- table queries
# What a block manager reads besides the calls above: a table's slot counters, the id space
# (physical ids, totals) and the swap log.





# The null block's surface and table misuse: reads the null block must forward, writes it
# must refuse, and calls a table must refuse in its current state.







TABLE_QUERY_OPS: tuple[type[Op], ...] = (TableSlots, IdSpace, SwapLog, NullBlockQuery,
                                         NullBlockMisuse, TableReallocate)
# --------------------------------------------------------------------------- end table queries


BLOCK_OPS: tuple[type[Op], ...] = (
    AllocateMutable,
    AllocateImmutable,
    AllocateImmutableChain,
    Append,
    Fork,
    Free,
    Swap,
    MarkAccessed,
    MarkComputed,
    ComputedBlockIds,
    CachedPrefix,
    CountTouched,
    CountFullTouched,
    ClearCopyOnWrites,
    HitRate,
    ResetPrefixCache,
    GetNullBlock,
)
TABLE_OPS: tuple[type[Op], ...] = (
    TableAllocate,
    TableAppend,
    TableEnsureSlots,
    TableFork,
    TableFree,
    TableSwap,
    TableMarkAccessed,
    MarkComputed,
    ClearCopyOnWrites,
    HitRate,
    ResetPrefixCache,
)
OPS_BY_KIND: dict[str, type[Op]] = {cls.kind: cls for cls in (*BLOCK_OPS, *TABLE_OPS,
                                                                *ENGINE_OPS, *TABLE_QUERY_OPS)}


# --------------------------------------------------------------------------- malformed


# ``Malformed``: a call with one argument of the wrong type or range
# (``models.families.v0.ops.malformed``).


OPS_BY_KIND[Malformed.kind] = Malformed


# --------------------------------------------------------------------------- block queries
# Extension queries of ``CpuGpuBlockAllocator`` that not every target has (vLLM 0.8 lacks
# them): the adapter detects them and the machines ask only targets that have them.



BLOCK_QUERY_OPS: tuple[type[Op], ...] = (BlockInfo,)
OPS_BY_KIND[BlockInfo.kind] = BlockInfo

# --------------------------------------------------------------------------- end block queries

# --------------------------------------------------------------------------- content hash
# The public hash function against the hashes blocks show (semantics:
# ``models.families.v0.ops.hashing``), and int-like token ids (an engine passes numpy ints):
# both are prefix-caching only.




HASH_OPS: tuple[type[Op], ...] = (HashRecompute, AllocateImmutableIntLike)
OPS_BY_KIND.update((cls.kind, cls) for cls in HASH_OPS)

# --------------------------------------------------------------------------- end content hash

# --------------------------------------------------------------------------- evictor level
# The target's own evictor (docs/API.md §6), driven directly: a fresh instance of the class
# its GPU prefix-caching allocator uses, built by the first of these operations in a program.
# They name raw block ids (the evictor owns no handles) and never touch the allocator, hence
# ``mutates = False``. After every step the snapshot shows the evictor (:class:`EvictorState`).
# Semantics and contract: ``models.families.v0.evictor_model``.


@dataclass(frozen=True, slots=True)
class EvictorAdd(Op):
    """``evictor.add(block_id, content_hash, num_hashed_tokens, last_accessed)``."""

    kind: ClassVar[str] = "evictor_add"
    mutates: ClassVar[bool] = False
    block_id: int
    content_hash: int
    num_hashed_tokens: int
    last_accessed: float


@dataclass(frozen=True, slots=True)
class EvictorUpdate(Op):
    """``evictor.update(block_id, last_accessed)``."""

    kind: ClassVar[str] = "evictor_update"
    mutates: ClassVar[bool] = False
    block_id: int
    last_accessed: float


@dataclass(frozen=True, slots=True)
class EvictorRemove(Op):
    """``evictor.remove(block_id)``."""

    kind: ClassVar[str] = "evictor_remove"
    mutates: ClassVar[bool] = False
    block_id: int


@dataclass(frozen=True, slots=True)
class EvictorEvict(Op):
    """``evictor.evict()``; value: ``[block_id, content_hash]``."""

    kind: ClassVar[str] = "evictor_evict"
    mutates: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class EvictorContains(Op):
    """``block_id in evictor`` for each of ``ids``; value: a list of bools."""

    kind: ClassVar[str] = "evictor_contains"
    mutates: ClassVar[bool] = False
    ids: tuple[int, ...]


EVICTOR_OPS: tuple[type[Op], ...] = (EvictorAdd, EvictorUpdate, EvictorRemove, EvictorEvict,
                                     EvictorContains)
OPS_BY_KIND.update({cls.kind: cls for cls in EVICTOR_OPS})

# --------------------------------------------------------------------------- end evictor level

# --------------------------------------------------------------------------- refcount level
# The target's own ``RefCounter`` and ``CopyOnWriteTracker`` (docs/API.md §7), driven
# directly: fresh instances of the classes its GPU allocator uses. ``RefNew`` builds the three
# objects (the counter, its read-only view, a tracker over the view); every other operation
# needs one built earlier in the program. Raw block ids (no handles), ``mutates = False``.
# After every step the snapshot shows the counter (:class:`RefcountState`).
# Semantics and contract: ``models.families.v0.refcount_model``.


@dataclass(frozen=True, slots=True)
class RefNew(Op):
    """``refcounter = RefCounter(ids)`` (duplicates allowed: they merge), ``view =
    refcounter.as_readonly()``, ``cow = CopyOnWriteTracker(view)``; replaces any earlier ones."""

    kind: ClassVar[str] = "ref_new"
    mutates: ClassVar[bool] = False
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RefIncr(Op):
    """``incr(block_id)`` on the counter, or on its read-only view (refused); value: the new
    count. ``block_id`` may be a bool (malformed: it aliases an int key)."""

    kind: ClassVar[str] = "ref_incr"
    mutates: ClassVar[bool] = False
    block_id: int
    readonly: bool = False


@dataclass(frozen=True, slots=True)
class RefDecr(Op):
    """``decr(block_id)`` on the counter or its read-only view; value: the new count."""

    kind: ClassVar[str] = "ref_decr"
    mutates: ClassVar[bool] = False
    block_id: int
    readonly: bool = False


@dataclass(frozen=True, slots=True)
class RefGet(Op):
    """``get(block_id)`` on the counter or its read-only view; value: the count."""

    kind: ClassVar[str] = "ref_get"
    mutates: ClassVar[bool] = False
    block_id: int
    readonly: bool = False


@dataclass(frozen=True, slots=True)
class CowAppendable(Op):
    """``cow.is_appendable(block)`` for a stand-in block whose only attribute is ``block_id``
    (docs/API.md reads nothing else); value: a bool."""

    kind: ClassVar[str] = "cow_appendable"
    mutates: ClassVar[bool] = False
    block_id: int | None


@dataclass(frozen=True, slots=True)
class CowRecord(Op):
    """``cow.record_cow(src_id, dst_id)`` (any ints; ``None`` is refused)."""

    kind: ClassVar[str] = "cow_record"
    mutates: ClassVar[bool] = False
    src_id: int | None
    dst_id: int | None


@dataclass(frozen=True, slots=True)
class CowClear(Op):
    """``cow.clear_cows()``; value: the recorded pairs, ``[[src, dst], ...]``."""

    kind: ClassVar[str] = "cow_clear"
    mutates: ClassVar[bool] = False


REFCOUNT_OPS: tuple[type[Op], ...] = (RefNew, RefIncr, RefDecr, RefGet, CowAppendable,
                                      CowRecord, CowClear)
OPS_BY_KIND.update({cls.kind: cls for cls in REFCOUNT_OPS})

# --------------------------------------------------------------------------- end refcount level

# --------------------------------------------------------------------------- stale ids
# What an engine passes after a free: the raw ids a sequence held (a stale id list), and the
# trackers' add/remove one tracker at a time (semantics: ``models.families.v0.ops.marks``).





STALE_ID_OPS: tuple[type[Op], ...] = (MarkStaleIds, SeqTrackerEdit)
OPS_BY_KIND.update({cls.kind: cls for cls in STALE_ID_OPS})

# --------------------------------------------------------------------------- end stale ids

# --------------------------------------------------------------------------- freed behind
# A block a ``BlockTable`` holds, freed through the allocator behind the table's back (an
# engine bug the table must survive; ``models.families.v0.table_misuse``), and the sequence trackers
# asked what they must refuse (``models.families.v0.ops.tracker_misuse``).





ENGINE_MISUSE_OPS: tuple[type[Op], ...] = (TableFreeBlock, SeqLostBlocks, SeqCachedTokensUnsized)
OPS_BY_KIND.update({cls.kind: cls for cls in ENGINE_MISUSE_OPS})

# --------------------------------------------------------------------------- end freed behind

# --------------------------------------------------------------------------- device calls
# One device's own allocator called directly (docs/API.md §4 and §4.5: ``alloc._allocators[device]``
# in the family), as a custom swapper does; the adapter detects it (a target without one is
# never asked). Semantics and contract: ``models.families.v0.ops.device`` (``DeviceSwap``:
# ``models.families.v0.ops.swap``).



DEVICE_OPS: tuple[type[Op], ...] = (DeviceSwap, DeviceSwapMisuse, DeviceMisuse, DeviceFreeId)
OPS_BY_KIND.update({cls.kind: cls for cls in DEVICE_OPS})

# --------------------------------------------------------------------------- end device calls

# --------------------------------------------------------------------------- end malformed

# --------------------------------------------------------------------------- construction
# The constructors (docs/API.md §4 and §5): a fresh allocator built beside the program's
# (which it never touches), with explicit block ids, then read back; or a constructor given one
# malformed argument. Semantics and contract: ``models.families.v0.ops.construction``.



OPS_BY_KIND[Construct.kind] = Construct

# --------------------------------------------------------------------------- end construction


# --------------------------------------------------------------------------- injected hash



OPS_BY_KIND[InjectedHash.kind] = InjectedHash

# --------------------------------------------------------------------------- end injected hash


# --------------------------------------------------------------------------- JSON codec


def _encode(value: Any) -> JSON:
    if isinstance(value, Dev):
        return value.value
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, Op):  # Malformed.call
        return op_to_json(value)
    if isinstance(value, ExtraKey):
        return extra_to_json(value)
    return value


_DEVICE_FIELDS = frozenset({"device", "src", "dst"})
_TOKEN_FIELDS = frozenset({"tokens", "blocks", "ids", "prev_computed",
                           "cpu_ids"})  # construction: cpu_ids
_TOKEN_FIELDS |= {"permuted", "tail"}  # injected hash (InjectedHash)


def _decode(name: str, value: JSON) -> Any:
    if name in _DEVICE_FIELDS:
        return None if value is None else Dev(value)
    if name in _TOKEN_FIELDS:
        return tuple(int(v) for v in value)
    if name in ("chunks", "lists"):
        return tuple(tuple(int(v) for v in chunk) for chunk in value)
    if name == "call":  # Malformed
        return op_from_json(value)
    if name == "bad":
        return frozen_literal(value)
    if name == "extra_hash":
        return extra_from_json(value)
    return value


def op_to_json(op: Op) -> dict[str, JSON]:
    """``{"op": kind, field: value, ...}``; devices as strings, tuples as lists."""
    out: dict[str, JSON] = {"op": op.kind}
    for f in fields(op):
        out[f.name] = _encode(getattr(op, f.name))
    return out


def op_from_json(data: Mapping[str, JSON]) -> Op:
    """Inverse of :func:`op_to_json`; raises ``ValueError`` on an unknown kind or field."""
    kind = data.get("op")
    cls = OPS_BY_KIND.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown operation kind {kind!r}")
    names = {f.name for f in fields(cls)}
    unknown = set(data) - names - {"op"}
    if unknown:
        raise ValueError(f"{kind}: unknown fields {sorted(unknown)}")
    return cls(**{k: _decode(k, v) for k, v in data.items() if k != "op"})


def outcome_to_json(outcome: Outcome) -> dict[str, JSON]:
    """Outcomes in traces: error kinds as strings, pairs as lists."""
    return {
        "error": None if outcome.error is None else outcome.error.value,
        "detail": outcome.detail,
        "value": outcome.value,
        "new_blocks": list(outcome.new_blocks),
        "new_table": outcome.new_table,
        "cows": [list(p) for p in outcome.cows],
        "admitted": outcome.admitted,
        "builtins": list(outcome.builtins),
    }


def outcome_from_json(data: Mapping[str, JSON]) -> Outcome:
    """Inverse of :func:`outcome_to_json`."""
    err = data.get("error")
    value = data.get("value")
    return Outcome(
        error=None if err is None else ErrorKind(err),
        detail=str(data.get("detail", "")),
        value=value,
        new_blocks=tuple(data.get("new_blocks", ())),
        new_table=data.get("new_table"),
        cows=tuple((int(a), int(b)) for a, b in data.get("cows", ())),
        admitted=data.get("admitted"),
        builtins=tuple(str(name) for name in data.get("builtins", ())),
    )
