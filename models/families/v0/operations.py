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

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeAlias

Tokens: TypeAlias = tuple[int, ...]
JSON: TypeAlias = Any


class Dev(enum.Enum):
    """A device pool. GPU ids come first, then CPU ids (``CpuGpuBlockAllocator.create``)."""

    GPU = "gpu"
    CPU = "cpu"


class ErrorKind(enum.Enum):
    """How a target call failed, as classified by the adapter."""

    NO_FREE_BLOCKS = "no_free_blocks"  # BlockAllocator.NoFreeBlocksError
    MISUSE = "misuse"  # a typed, documented error for bad input
    ASSERTION = "assertion"  # upstream-style ``assert`` (vanishes under ``python -O``)
    UNEXPECTED = "unexpected"  # anything else: the target crashed


# --------------------------------------------------------------------------- extra keys


#: A request key's identity (:meth:`ExtraKey.identity`): LoRA id, salt bytes, tagged mm hashes.
KeyIdentity: TypeAlias = tuple[int | None, bytes | None, tuple[tuple[str, int | str | bytes], ...]]


@dataclass(frozen=True, slots=True, eq=False)
class ExtraKey:
    """Request-level cache keys an engine folds into a block's ``extra_hash``: a LoRA
    adapter's int id, a cache salt, multimodal input hashes. The adapter renders it with the
    target's own extra-key function (its ``make_extra_hash``; vLLM: ``Sequence.extra_hash``).

    Contract: equal keys share cached blocks, different keys (and a key versus no key) never
    do. Equality is the request's identity (:meth:`identity`), not the Python values: a salt is
    a byte string and a ``str`` salt stands for its UTF-8 bytes (``"a"`` is ``b"a"``), while a
    multimodal hash keeps its type (``5``, ``"5"`` and ``b"5"`` are three inputs). The empty key
    is no key: it renders as ``None`` and equals ``None`` (plain requests share with it).
    ``lora_id`` is positive (an engine's "no LoRA" is ``None``, not 0)."""

    lora_id: int | None = None
    cache_salt: str | bytes | None = None
    mm_hashes: tuple[int | str | bytes, ...] = ()

    def __post_init__(self) -> None:
        if self.lora_id is not None and (type(self.lora_id) is not int or self.lora_id < 1):
            raise ValueError(f"ExtraKey.lora_id must be a positive int, got {self.lora_id!r}")
        if self.cache_salt is not None and type(self.cache_salt) not in (str, bytes):
            raise ValueError(f"ExtraKey.cache_salt must be a str or bytes, "
                             f"got {self.cache_salt!r}")
        if type(self.mm_hashes) is not tuple or not all(
                type(h) in (int, str, bytes) for h in self.mm_hashes):
            raise ValueError(f"ExtraKey.mm_hashes must be a tuple of int, str or bytes, "
                             f"got {self.mm_hashes!r}")

    def identity(self) -> KeyIdentity | None:
        """What tells requests apart (``None`` for the empty key)."""
        if self.lora_id is None and self.cache_salt is None and not self.mm_hashes:
            return None
        salt = self.cache_salt.encode("utf-8") if isinstance(self.cache_salt, str) \
            else self.cache_salt
        return self.lora_id, salt, tuple((type(h).__name__, h) for h in self.mm_hashes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ExtraKey):
            return self.identity() == other.identity()
        if other is None:
            return self.identity() is None
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.identity())

    @property
    def fields_used(self) -> frozenset[str]:
        """Which kinds of key it names: ``"lora"``, ``"salt"``, ``"mm"``, and ``"bytes"`` when
        a salt or multimodal hash is given as bytes."""
        return frozenset(name for name, on in (
            ("lora", self.lora_id is not None), ("salt", self.cache_salt is not None),
            ("mm", bool(self.mm_hashes)),
            ("bytes", isinstance(self.cache_salt, bytes)
             or any(isinstance(h, bytes) for h in self.mm_hashes))) if on)


#: What an operation passes as ``extra_hash``: a raw int, request keys, or nothing.
Extra: TypeAlias = int | ExtraKey | None


def _bytes_to_json(value: JSON) -> JSON:
    return {"bytes": value.hex()} if isinstance(value, bytes) else value


def _bytes_from_json(value: JSON) -> JSON:
    if isinstance(value, Mapping):
        if set(value) != {"bytes"} or not isinstance(value["bytes"], str):
            raise ValueError(f"extra key: bytes are {{\"bytes\": hex}}, got {value!r}")
        return bytes.fromhex(value["bytes"])
    return value


def extra_to_json(extra: Extra) -> JSON:
    """An int or ``None`` as itself; an :class:`ExtraKey` as an object of its fields (bytes
    as ``{"bytes": hex}``)."""
    if isinstance(extra, ExtraKey):
        return {"lora_id": extra.lora_id, "cache_salt": _bytes_to_json(extra.cache_salt),
                "mm_hashes": [_bytes_to_json(h) for h in extra.mm_hashes]}
    return extra


def extra_from_json(value: JSON) -> Extra:
    """Inverse of :func:`extra_to_json` (traces from before extra keys hold ints only)."""
    if isinstance(value, Mapping):
        unknown = set(value) - {"lora_id", "cache_salt", "mm_hashes"}
        if unknown:
            raise ValueError(f"extra key: unknown fields {sorted(unknown)}")
        return ExtraKey(value.get("lora_id"), _bytes_from_json(value.get("cache_salt")),
                        tuple(_bytes_from_json(h) for h in value.get("mm_hashes", ())))
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ValueError(f"extra_hash must be an int, an extra key or null, got {value!r}")

# --------------------------------------------------------------------------- end extra keys


@dataclass(frozen=True, slots=True)
class Op:
    """Base of every operation. ``kind`` is the stable name used in JSON and reports."""

    kind: ClassVar[str] = ""
    mutates: ClassVar[bool] = True


# --------------------------------------------------------------------------- block level


@dataclass(frozen=True, slots=True)
class AllocateMutable(Op):
    """``allocate_mutable_block(prev, device, extra_hash)``: one empty block chained to
    ``prev``."""

    kind: ClassVar[str] = "allocate_mutable"
    prev: int | None
    device: Dev = Dev.GPU
    extra_hash: Extra = None


@dataclass(frozen=True, slots=True)
class AllocateImmutable(Op):
    """``allocate_immutable_block(prev, tokens, device, extra_hash)``: one full block."""

    kind: ClassVar[str] = "allocate_immutable"
    prev: int | None
    tokens: Tokens
    device: Dev = Dev.GPU
    extra_hash: Extra = None


@dataclass(frozen=True, slots=True)
class AllocateImmutableChain(Op):
    """``allocate_immutable_blocks(prev, chunks, device, extra_hash)``: all or nothing."""

    kind: ClassVar[str] = "allocate_immutable_chain"
    prev: int | None
    chunks: tuple[Tokens, ...]
    device: Dev = Dev.GPU
    extra_hash: Extra = None


@dataclass(frozen=True, slots=True)
class Append(Op):
    """``block.append_token_ids(tokens)``: copy-on-write if shared, promotion once full."""

    kind: ClassVar[str] = "append"
    block: int
    tokens: Tokens


@dataclass(frozen=True, slots=True)
class Fork(Op):
    """``fork(block)``: new handles sharing every id of the chain ending at ``block``."""

    kind: ClassVar[str] = "fork"
    block: int


@dataclass(frozen=True, slots=True)
class Free(Op):
    """``free(block)``."""

    kind: ClassVar[str] = "free"
    block: int


@dataclass(frozen=True, slots=True)
class Swap(Op):
    """``swap(blocks, src, dst)``: swap out of ``src`` then in to ``dst``.

    Value: the returned mapping as ``[src_id, dst_id]`` pairs in the mapping's order."""

    kind: ClassVar[str] = "swap"
    blocks: tuple[int, ...]
    src: Dev
    dst: Dev


@dataclass(frozen=True, slots=True)
class MarkAccessed(Op):
    """``mark_blocks_as_accessed(ids of blocks, now)``."""

    kind: ClassVar[str] = "mark_accessed"
    blocks: tuple[int, ...]
    now: float


@dataclass(frozen=True, slots=True)
class MarkComputed(Op):
    """``mark_blocks_as_computed(ids)``: marks every block touched since the last call."""

    kind: ClassVar[str] = "mark_computed"
    blocks: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ComputedBlockIds(Op):
    """Aphrodite ``get_computed_block_ids(prev_computed, ids of blocks, skip_last)``; value:
    list of ids. ``prev_computed`` (the ids already known computed) is ``()`` but in a
    ``Malformed`` call (stale ids: a list longer than the ids considered)."""

    kind: ClassVar[str] = "computed_block_ids"
    mutates: ClassVar[bool] = False
    blocks: tuple[int, ...]
    skip_last: bool = True
    prev_computed: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class CachedPrefix(Op):
    """vLLM ``find_cached_blocks_prefix(hashes of blocks, device)``; value: list of hashes."""

    kind: ClassVar[str] = "cached_prefix"
    mutates: ClassVar[bool] = False
    blocks: tuple[int, ...]
    device: Dev = Dev.GPU


@dataclass(frozen=True, slots=True)
class CountTouched(Op):
    """Aphrodite ``get_num_blocks_touched(blocks, device, lookahead)``; value: int."""

    kind: ClassVar[str] = "count_touched"
    mutates: ClassVar[bool] = False
    blocks: tuple[int, ...]
    device: Dev = Dev.GPU
    lookahead: int = 0


@dataclass(frozen=True, slots=True)
class CountFullTouched(Op):
    """vLLM ``get_num_full_blocks_touched(blocks, device)``; value: int."""

    kind: ClassVar[str] = "count_full_touched"
    mutates: ClassVar[bool] = False
    blocks: tuple[int, ...]
    device: Dev = Dev.GPU


@dataclass(frozen=True, slots=True)
class ClearCopyOnWrites(Op):
    """``clear_copy_on_writes()``; value: the (src, dst) pairs recorded since the last drain."""

    kind: ClassVar[str] = "clear_cows"


@dataclass(frozen=True, slots=True)
class HitRate(Op):
    """``get_prefix_cache_hit_rate(device)``; value: float."""

    kind: ClassVar[str] = "hit_rate"
    mutates: ClassVar[bool] = False
    device: Dev = Dev.GPU


@dataclass(frozen=True, slots=True)
class ResetPrefixCache(Op):
    """vLLM ``reset_prefix_cache(device)``; value: bool (False while any block is in use)."""

    kind: ClassVar[str] = "reset_prefix_cache"
    device: Dev | None = None


@dataclass(frozen=True, slots=True)
class GetNullBlock(Op):
    """``allocate_or_get_null_block()``: the first call takes one GPU block forever."""

    kind: ClassVar[str] = "null_block"


# --------------------------------------------------------------------------- engine-side
# What an engine's block manager asks besides the allocator calls above: the common computed
# prefix of a batch, bursts of cache queries (the hit-rate window), and the per-sequence
# trackers of ``prefix_caching_block`` (one entry per table: the table handle is the seq_id).


@dataclass(frozen=True, slots=True)
class CommonComputedIds(Op):
    """``get_common_computed_block_ids([[ids of blocks] for blocks in lists])``; value: the
    list, or ``""`` (upstream's ``commonprefix`` of nothing) when every list is empty."""

    kind: ClassVar[str] = "common_computed_ids"
    mutates: ClassVar[bool] = False
    lists: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class HitBurst(Op):
    """``count`` times ``allocate_immutable_block(block.prev_block, block.token_ids, device,
    extra_hash)`` then ``free`` of the new block: ``count`` cache queries on ``block``'s
    content (cached and held, so every one is a hit and nothing else changes)."""

    kind: ClassVar[str] = "hit_burst"
    block: int
    count: int
    device: Dev = Dev.GPU
    extra_hash: Extra = None


@dataclass(frozen=True, slots=True)
class TrackerStart(Op):
    """The engine's trackers: ``ComputedBlocksTracker(alloc[, block_size, True])`` and
    ``LastAccessBlocksTracker(alloc)``."""

    kind: ClassVar[str] = "tracker_start"


@dataclass(frozen=True, slots=True)
class SeqTrack(Op):
    """``add_seq(table)`` on the last-access tracker (and the Aphrodite computed tracker)."""

    kind: ClassVar[str] = "seq_track"
    table: int


@dataclass(frozen=True, slots=True)
class SeqUntrack(Op):
    """``remove_seq(table)`` on the last-access tracker, and on the computed tracker if
    ``computed`` (it holds an entry for the table)."""

    kind: ClassVar[str] = "seq_untrack"
    table: int
    computed: bool = True


@dataclass(frozen=True, slots=True)
class SeqCachedTokens(Op):
    """vLLM ``get_num_cached_tokens(seq)`` for a sequence with the table's tokens and
    extra_hash; value: int (frozen while ``prefill``)."""

    kind: ClassVar[str] = "seq_cached_tokens"
    table: int
    prefill: bool = True


@dataclass(frozen=True, slots=True)
class SeqComputedIds(Op):
    """Aphrodite ``get_cached_computed_blocks_and_update(table, table.physical_block_ids)``;
    value: list of ids."""

    kind: ClassVar[str] = "seq_computed_ids"
    table: int


@dataclass(frozen=True, slots=True)
class SeqAccess(Op):
    """``update_last_access(table, now)``."""

    kind: ClassVar[str] = "seq_access"
    table: int
    now: float


@dataclass(frozen=True, slots=True)
class SeqStampBlocks(Op):
    """``update_seq_blocks_last_access(table, table.physical_block_ids)``."""

    kind: ClassVar[str] = "seq_stamp_blocks"
    table: int


ENGINE_OPS: tuple[type[Op], ...] = (
    CommonComputedIds,
    HitBurst,
    TrackerStart,
    SeqTrack,
    SeqUntrack,
    SeqCachedTokens,
    SeqComputedIds,
    SeqAccess,
    SeqStampBlocks,
)
# --------------------------------------------------------------------------- end engine-side


# --------------------------------------------------------------------------- sequence level


@dataclass(frozen=True, slots=True)
class TableAllocate(Op):
    """New ``BlockTable``; ``allocate(tokens, device, extra_hash)``: full chunks immutable, tail
    mutable."""

    kind: ClassVar[str] = "table_allocate"
    tokens: Tokens
    device: Dev = Dev.GPU
    extra_hash: Extra = None
    window: int | None = None  # BlockTable(max_block_sliding_window=window)


@dataclass(frozen=True, slots=True)
class TableAppend(Op):
    """``append_token_ids(tokens, num_lookahead_slots=lookahead)`` with the table's extra_hash."""

    kind: ClassVar[str] = "table_append"
    table: int
    tokens: Tokens
    lookahead: int = 0
    computed: int | None = None  # num_computed_slots (sliding-window tables); value: null id


@dataclass(frozen=True, slots=True)
class TableEnsureSlots(Op):
    """``ensure_num_empty_slots(slots)``."""

    kind: ClassVar[str] = "table_ensure_slots"
    table: int
    slots: int


@dataclass(frozen=True, slots=True)
class TableFork(Op):
    """``fork()``: a new table sharing every block."""

    kind: ClassVar[str] = "table_fork"
    table: int


@dataclass(frozen=True, slots=True)
class TableFree(Op):
    """``free()``."""

    kind: ClassVar[str] = "table_free"
    table: int


@dataclass(frozen=True, slots=True)
class TableSwap(Op):
    """Engine swap of a whole sequence: admission check with the allocator's touched count,
    then ``swap(table.blocks, src, dst)`` and ``table.update(blocks)``; value as for ``Swap``."""

    kind: ClassVar[str] = "table_swap"
    table: int
    src: Dev
    dst: Dev


@dataclass(frozen=True, slots=True)
class TableMarkAccessed(Op):
    """``mark_blocks_as_accessed(table.physical_block_ids, now)``."""

    kind: ClassVar[str] = "table_mark_accessed"
    table: int
    now: float


# --------------------------------------------------------------------------- table queries
# What a block manager reads besides the calls above: a table's slot counters, the id space
# (physical ids, totals) and the swap log.


@dataclass(frozen=True, slots=True)
class TableSlots(Op):
    """``num_full_slots``, ``get_unseen_token_ids(tokens)`` (``tokens``: the whole sequence),
    ``get_num_blocks_touched_by_append_slots(unseen, lookahead)`` and, where the static method
    takes lookahead (vLLM generation), ``get_num_required_blocks(tokens, block_size,
    lookahead)``; value: ``{"full_slots": int, "unseen": [int], "touched": int[, "required":
    int]}``."""

    kind: ClassVar[str] = "table_slots"
    mutates: ClassVar[bool] = False
    table: int
    tokens: Tokens
    lookahead: int = 0


@dataclass(frozen=True, slots=True)
class IdSpace(Op):
    """``get_num_total_blocks(device)``, ``all_block_ids`` and ``get_physical_block_id(device,
    i)`` for each ``i`` of ``ids`` (absolute ids of ``device``: GPU ``0..G-1``, CPU ``G..``);
    value: ``{"total": int, "all": sorted [int], "physical": [int]}``."""

    kind: ClassVar[str] = "id_space"
    mutates: ClassVar[bool] = False
    device: Dev
    ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SwapLog(Op):
    """``get_and_reset_swaps()``; value: ``[src, dst]`` pairs of every swap since the last
    call (a later swap of the same source id overwrites its entry in place)."""

    kind: ClassVar[str] = "swap_log"


# The null block's surface and table misuse: reads the null block must forward, writes it
# must refuse, and calls a table must refuse in its current state.


@dataclass(frozen=True, slots=True)
class NullBlockQuery(Op):
    """Once the null block exists: ``allocate_or_get_null_block()`` again, then its
    ``block_id``, ``token_ids``, ``num_empty_slots``, ``is_full``, ``prev_block``,
    ``content_hash`` and (vLLM generation) ``extra_hash``; with ``stamp`` (prefix-caching
    targets) also ``last_accessed`` set to ``stamp`` and ``computed`` to ``False``, both read
    back; last, ``free`` of it, which the allocator ignores. Value: ``{read: value}``
    (``prev_block`` as ``no_prev_block``: whether it is ``None``)."""

    kind: ClassVar[str] = "null_block_query"
    mutates: ClassVar[bool] = False
    stamp: float | None = None


#: The writes :class:`NullBlockMisuse` tries (drawn by the machines and the fuzz decoder).
NULL_BLOCK_WRITES: tuple[str, ...] = ("append", "set_id", "fork")
#: Every :class:`NullBlockMisuse`: the writes, and the GPU allocator's own ``free`` and
#: ``fork`` of the null block (tried in a once-per-null-block sweep only, so seeded draws stay
#: as they were).
NULL_BLOCK_MISUSES: tuple[str, ...] = (*NULL_BLOCK_WRITES, "device_free", "device_fork")


@dataclass(frozen=True, slots=True)
class NullBlockMisuse(Op):
    """A write to the existing null block: ``append_token_ids([1])`` (``"append"``), setting
    its ``block_id`` (``"set_id"``) or ``alloc.fork`` of it (``"fork"``); or ``free`` or
    ``fork`` of it on the GPU allocator itself (``"device_free"``, ``"device_fork"``: the
    device-aware ``free`` ignores the null block, a device's own must neither release nor
    share its id). Always a misuse."""

    kind: ClassVar[str] = "null_block_misuse"
    action: str


@dataclass(frozen=True, slots=True)
class TableReallocate(Op):
    """``allocate(tokens)`` on the existing table ``table``: a misuse while it holds blocks."""

    kind: ClassVar[str] = "table_reallocate"
    table: int
    tokens: Tokens


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


@dataclass(frozen=True, slots=True)
class Malformed(Op):
    """``call`` with its argument ``argument`` (a field name of ``call``) replaced by the
    literal ``bad``: a value of the wrong type or range (``None``, ``"x"``, ``1.5``, ``True``,
    ``-1``, ``2**64``, a list of strs where token ids are expected, ...). Lists are kept as
    tuples so the operation stays hashable; the call plan passes them as lists.

    The contract (``models.families.v0.malformed``): a typed misuse error and an unchanged
    allocator."""

    kind: ClassVar[str] = "malformed"
    call: Op
    argument: str
    bad: JSON


def frozen_literal(value: JSON) -> JSON:
    """A JSON literal with every list turned into a tuple (hashable, as ``Malformed.bad``)."""
    if isinstance(value, list | tuple):
        return tuple(frozen_literal(v) for v in value)
    return value


OPS_BY_KIND[Malformed.kind] = Malformed


# --------------------------------------------------------------------------- block queries
# Extension queries of ``CpuGpuBlockAllocator`` that not every target has (vLLM 0.8 lacks
# them): the adapter detects them and the machines ask only targets that have them.


@dataclass(frozen=True, slots=True)
class BlockInfo(Op):
    """``get_block_refcount(id)`` and ``get_block_device(id)`` of each block's id; value:
    ``[[refcount, device value], ...]`` in the order of ``blocks``."""

    kind: ClassVar[str] = "block_info"
    mutates: ClassVar[bool] = False
    blocks: tuple[int, ...]


BLOCK_QUERY_OPS: tuple[type[Op], ...] = (BlockInfo,)
OPS_BY_KIND[BlockInfo.kind] = BlockInfo

# --------------------------------------------------------------------------- end block queries

# --------------------------------------------------------------------------- content hash
# The public hash function against the hashes blocks show (semantics:
# ``models.families.v0.hash_query``), and int-like token ids (an engine passes numpy ints): both are
# prefix-caching only.


@dataclass(frozen=True, slots=True)
class HashRecompute(Op):
    """``block.content_hash``, then the block class's ``hash_block_tokens(is_first_block,
    prev_block.content_hash (None when first), block.token_ids[, extra_hash=block.extra_hash])``
    (Aphrodite: static, no ``extra_hash``; vLLM: a classmethod taking it). ``is_first_block``
    says whether ``block`` starts its chain; ``int_like`` passes the token ids, and a
    predecessor's hash, as instances of an ``int`` subclass; ``sentinel`` passes a first
    block's predecessor hash as the class's ``_none_hash`` (vLLM generation: the same as
    ``None``). Value: ``[content_hash, recomputed]``.

    A :class:`Malformed` call of it may also name ``prev_block_hash`` and ``token_ids``, the
    hash function's parameters the plan fills from the block."""

    kind: ClassVar[str] = "hash_recompute"
    mutates: ClassVar[bool] = False
    block: int
    is_first_block: bool
    int_like: bool = False
    sentinel: bool = False


@dataclass(frozen=True, slots=True)
class AllocateImmutableIntLike(AllocateImmutable):
    """``AllocateImmutable`` with the token ids passed as instances of an ``int`` subclass
    (as numpy hands them out): the same call, so the same hit, hash and KV content."""

    kind: ClassVar[str] = "allocate_immutable_int_like"


HASH_OPS: tuple[type[Op], ...] = (HashRecompute, AllocateImmutableIntLike)
OPS_BY_KIND.update((cls.kind, cls) for cls in HASH_OPS)

# --------------------------------------------------------------------------- end content hash

# --------------------------------------------------------------------------- evictor level
# The target's own evictor (API.md section 6), driven directly: a fresh instance of the class
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


@dataclass(frozen=True, slots=True)
class EvictorState:
    """What the evictor shows after a step: ``num_blocks``, and ``free_table`` as
    ``{block_id: (content_hash, num_hashed_tokens, last_accessed)}``."""

    num_blocks: int
    table: Mapping[int, tuple[int, int, float]]


EVICTOR_OPS: tuple[type[Op], ...] = (EvictorAdd, EvictorUpdate, EvictorRemove, EvictorEvict,
                                     EvictorContains)
OPS_BY_KIND.update({cls.kind: cls for cls in EVICTOR_OPS})

# --------------------------------------------------------------------------- end evictor level

# --------------------------------------------------------------------------- refcount level
# The target's own ``RefCounter`` and ``CopyOnWriteTracker`` (API.md section 7), driven
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
    (API.md reads nothing else); value: a bool."""

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


@dataclass(frozen=True, slots=True)
class RefcountState:
    """What the counter shows after a step: ``get(id)`` of each id it was built with;
    ``pending``: the tracker's recorded pairs (a non-destructive ``pending()``), for targets
    whose tracker has one (an extension, not in API.md), else None."""

    counts: Mapping[int, int]
    pending: tuple[tuple[int | None, int | None], ...] | None = None


REFCOUNT_OPS: tuple[type[Op], ...] = (RefNew, RefIncr, RefDecr, RefGet, CowAppendable,
                                      CowRecord, CowClear)
OPS_BY_KIND.update({cls.kind: cls for cls in REFCOUNT_OPS})

# --------------------------------------------------------------------------- end refcount level

# --------------------------------------------------------------------------- stale ids
# What an engine passes after a free: the raw ids a sequence held (a stale id list), and the
# trackers' add/remove one tracker at a time (semantics: ``models.families.v0.stale_ids``).


@dataclass(frozen=True, slots=True)
class MarkStaleIds(Op):
    """``mark_blocks_as_accessed(ids, now)`` with, for each handle, the id it holds if live,
    else the id it held when it was freed. Per id (API.md 4.3): active -> access time;
    evictable -> ``evictor.update`` (its LRU rank moves); free -> misuse (``ValueError``);
    another device's -> misuse (``KeyError``). Every id is checked before any is marked."""

    kind: ClassVar[str] = "mark_stale_ids"
    blocks: tuple[int, ...]
    now: float


#: The trackers :class:`SeqTrackerEdit` names.
TRACKERS: tuple[str, ...] = ("computed", "access")


@dataclass(frozen=True, slots=True)
class SeqTrackerEdit(Op):
    """``add_seq(table)`` (``add``) or ``remove_seq(table)`` on one tracker alone
    (``tracker``: ``"computed"``, the Aphrodite ``ComputedBlocksTracker``, or ``"access"``)."""

    kind: ClassVar[str] = "seq_tracker_edit"
    table: int
    tracker: str
    add: bool


STALE_ID_OPS: tuple[type[Op], ...] = (MarkStaleIds, SeqTrackerEdit)
OPS_BY_KIND.update({cls.kind: cls for cls in STALE_ID_OPS})

# --------------------------------------------------------------------------- end stale ids

# --------------------------------------------------------------------------- freed behind
# A block a ``BlockTable`` holds, freed through the allocator behind the table's back (an
# engine bug the table must survive; ``models.families.v0.table_misuse``), and the sequence trackers
# asked what they must refuse (``models.families.v0.tracker_misuse``).


@dataclass(frozen=True, slots=True)
class TableFreeBlock(Op):
    """``alloc.free(table.blocks[index])``: a legal free of a held block; the table keeps
    the (now id-less) object."""

    kind: ClassVar[str] = "table_free_block"
    table: int
    index: int


@dataclass(frozen=True, slots=True)
class SeqLostBlocks(Op):
    """Aphrodite ``get_cached_computed_blocks_and_update(table, other.physical_block_ids)``:
    the sequence asked with the ids of a table holding fewer blocks than its computed-id list
    covers (it lost blocks since the last call). Always a misuse
    (``models.families.v0.tracker_misuse``)."""

    kind: ClassVar[str] = "seq_lost_blocks"
    table: int
    other: int


@dataclass(frozen=True, slots=True)
class SeqCachedTokensUnsized(Op):
    """vLLM ``get_num_cached_tokens(seq)`` (the table's tokens) on a fresh
    ``ComputedBlocksTracker(alloc)`` built without a ``block_size`` (the Aphrodite
    construction). Always a misuse (``models.families.v0.tracker_misuse``)."""

    kind: ClassVar[str] = "seq_cached_tokens_unsized"
    table: int


ENGINE_MISUSE_OPS: tuple[type[Op], ...] = (TableFreeBlock, SeqLostBlocks, SeqCachedTokensUnsized)
OPS_BY_KIND.update({cls.kind: cls for cls in ENGINE_MISUSE_OPS})

# --------------------------------------------------------------------------- end freed behind

# --------------------------------------------------------------------------- device calls
# One device's own allocator called directly (API.md 4 and 4.5: ``alloc._allocators[device]``
# in the family), as a custom swapper does; the adapter detects it (a target without one is
# never asked). Semantics and contract: ``models.families.v0.device_calls``.


@dataclass(frozen=True, slots=True)
class DeviceSwap(Op):
    """A swap by hand: ``swap_out(blocks)`` on ``src``'s allocator, then ``swap_in(blocks)``
    on ``dst``'s. When the swap-in raises ``NoFreeBlocksError`` the swapper puts the blocks
    back, ``swap_in`` on ``src`` in reverse order, and reports the swap refused. Value:
    ``{"pairs": [[id before, id after] per block], "swapped": bool}``."""

    kind: ClassVar[str] = "device_swap"
    blocks: tuple[int, ...]
    src: Dev
    dst: Dev


#: What :class:`DeviceSwapMisuse` tries on ``device``'s allocator.
DEVICE_SWAP_MISUSES: tuple[str, ...] = ("swap_in_held", "swap_out_foreign", "free_foreign")


@dataclass(frozen=True, slots=True)
class DeviceSwapMisuse(Op):
    """On ``device``'s allocator: ``swap_in(blocks)`` of blocks that still hold an id
    (``"swap_in_held"``), ``swap_out(blocks)`` of another device's blocks
    (``"swap_out_foreign"``) or ``free(blocks[0])`` of another device's block
    (``"free_foreign"``). Always misuse."""

    kind: ClassVar[str] = "device_swap_misuse"
    action: str
    blocks: tuple[int, ...]
    device: Dev


#: What :class:`DeviceMisuse` tries.
DEVICE_MISUSES: tuple[str, ...] = ("device_argument", "physical_unknown", "refcount_unknown",
                                   "device_unknown", "free_id_twice", "free_foreign_allocator",
                                   "swap_in_oversized",
                                   # the device argument of the other two
                                   # allocation calls
                                   "device_argument_immutable", "device_argument_chain")


@dataclass(frozen=True, slots=True)
class DeviceMisuse(Op):
    """A call that names what the allocator does not own: on ``device``'s allocator,
    ``allocate_mutable_block(None, device=Device.<device>)`` (``"device_argument"``: its
    methods take no device), ``get_physical_block_id(block_id)`` of an id it does not own
    (``"physical_unknown"``), ``free_block_id(block_id)`` of a free id (``"free_id_twice"``,
    naive allocators of the vLLM generation); on the device-aware allocator
    ``get_block_refcount(block_id)`` / ``get_block_device(block_id)`` of an id no device owns
    (``"refcount_unknown"``, ``"device_unknown"``) and ``free`` of a block another allocator
    made and freed (``"free_foreign_allocator"``); on ``device``'s allocator, ``swap_in`` of a
    full block of twice the block size, swapped out of another allocator
    (``"swap_in_oversized"``); ``"device_argument_immutable"`` / ``"device_argument_chain"``:
    as ``"device_argument"`` with ``allocate_immutable_block(None, [0] * block_size, device=..)``
    / ``allocate_immutable_blocks(None, [[0] * block_size], device=..)``. Always misuse."""

    kind: ClassVar[str] = "device_misuse"
    action: str
    device: Dev = Dev.GPU
    block_id: int | None = None


@dataclass(frozen=True, slots=True)
class DeviceFreeId(Op):
    """vLLM ``free_block_id(block.block_id)`` on ``device``'s allocator (a naive one; the
    block lives there), then ``block.block_id = None``: the block released by id, as
    ``free(block, keep_block_object=True)``."""

    kind: ClassVar[str] = "device_free_id"
    block: int
    device: Dev = Dev.GPU


DEVICE_OPS: tuple[type[Op], ...] = (DeviceSwap, DeviceSwapMisuse, DeviceMisuse, DeviceFreeId)
OPS_BY_KIND.update({cls.kind: cls for cls in DEVICE_OPS})

# --------------------------------------------------------------------------- end device calls

# --------------------------------------------------------------------------- end malformed

# --------------------------------------------------------------------------- construction
# The constructors (API.md sections 4 and 5): a fresh allocator built beside the program's
# (which it never touches), with explicit block ids, then read back; or a constructor given one
# malformed argument. Semantics and contract: ``models.families.v0.construction``.

#: The single-device allocator classes :class:`Construct` builds.
CONSTRUCT_ALLOCATORS: tuple[str, ...] = ("naive", "prefix_caching")


@dataclass(frozen=True, slots=True)
class Construct(Op):
    """Build ``allocator`` over ``ids`` with the program's block size (``"naive"``:
    ``NaiveBlockAllocator(NaiveBlock, len(ids), block_size, block_ids=ids)``;
    ``"prefix_caching"``: ``PrefixCachingBlockAllocator(len(ids), block_size, block_ids=ids)``;
    ids ``0..n-1`` in order without an ``argument``: ``block_ids`` left to its default);
    with ``devices``, a second one of the same class over ``cpu_ids`` and both wrapped in
    ``CpuGpuBlockAllocator(cpu_block_allocator=cpu, gpu_block_allocator=gpu)``. Then read it
    back, per device (GPU first): total and free counts, ``all_block_ids``,
    ``get_physical_block_id`` of each id, the ids of as many mutable allocations as it has ids,
    and the free count after. Value: ``{"total": [..], "free": [..], "all": sorted [..],
    "physical": [..], "handed": [..], "free_after": [..]}``.

    ``argument`` (not ``""``) names the constructor argument replaced by ``bad``:
    ``block_ids``, ``num_blocks``, ``block_size``, ``eviction_policy``, ``hash_function`` (of
    the GPU allocator), ``cpu_block_ids``, ``cpu_block_allocator`` (``bad`` must be
    ``"gpu_block_allocator"``: the GPU allocator passed as both) or ``allocator_type``
    (``CpuGpuBlockAllocator.create(bad, len(ids), len(cpu_ids), block_size)``). Then only the
    constructors run.

    ``create``: built instead by ``CpuGpuBlockAllocator.create(allocator,
    len(ids), len(cpu_ids), block_size)``, which numbers GPU ids ``0..G-1`` and CPU ids
    ``G..G+C-1`` (API.md 5): so it needs ``devices``, ``ids == range(G)``, ``cpu_ids ==
    range(G, G+C)`` and no ``argument``; the read-outs are the same."""

    kind: ClassVar[str] = "construct"
    mutates: ClassVar[bool] = False
    allocator: str
    ids: tuple[int, ...]
    devices: bool = False
    cpu_ids: tuple[int, ...] = ()
    argument: str = ""
    bad: JSON = None
    create: bool = False  # built by ``CpuGpuBlockAllocator.create``


OPS_BY_KIND[Construct.kind] = Construct

# --------------------------------------------------------------------------- end construction


# --------------------------------------------------------------------------- injected hash


@dataclass(frozen=True, slots=True)
class InjectedHash(Op):
    """An extension (a device-aware ``create`` that takes ``hash_function``): beside the
    program's allocator, ``built = CpuGpuBlockAllocator.create("prefix_caching", 4, 4,
    block_size, hash_function=models.families.v0.injected_hash.injected_hash)``; then on each device
    (GPU first) ``x = allocate_immutable_block(None, tokens)``, ``y = allocate_immutable_block(None,
    permuted)``, ``z = allocate_mutable_block(None)`` then ``z.append_token_ids(permuted)``, and ``c
    = allocate_immutable_blocks(None, [permuted, tail])``. ``permuted`` is a permutation of
    ``tokens``; all three are one full block. Value: ``{"hashes": [[x, z, c[1] content_hash] per
    device], "ids": [[x, y, z, c[0] block_id] per device]}``. Semantics:
    ``models.families.v0.injected_hash``."""

    kind: ClassVar[str] = "injected_hash"
    mutates: ClassVar[bool] = False
    tokens: tuple[int, ...]
    permuted: tuple[int, ...]
    tail: tuple[int, ...]


OPS_BY_KIND[InjectedHash.kind] = InjectedHash

# --------------------------------------------------------------------------- end injected hash


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the target did for one operation.

    ``new_blocks``/``new_table`` are the handles the runner created (empty on failure);
    ``cows`` are the copy-on-write pairs drained right after the call, as an engine does every
    scheduling step; ``admitted`` is the allocator's own admission verdict for ``TableSwap``;
    ``builtins`` names the builtin exception classes the error is an instance of (API.md pins
    some: :mod:`models.families.v0.error_classes`).
    """

    error: ErrorKind | None = None
    detail: str = ""
    builtins: tuple[str, ...] = ()
    value: JSON = None
    new_blocks: tuple[int, ...] = ()
    new_table: int | None = None
    cows: tuple[tuple[int, int], ...] = ()
    admitted: bool | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the allocator shows after an operation.

    ``blocks`` covers every block handle live before or after the operation (a freed handle
    reports ``None``); ``tables`` every table live before or after it. ``cached``,
    ``evictable`` (ids per device) and ``refcounts`` (id -> count, every id of both devices)
    are present only for targets whose adapter can introspect them. ``evictor``: the
    standalone evictor of the evictor-level operations, once one exists; ``refcount``: the
    standalone counter and CoW tracker of the refcount-level operations, likewise.
    """

    free: Mapping[Dev, int]
    blocks: Mapping[int, int | None] = field(default_factory=dict)
    block_tokens: Mapping[int, Tokens] = field(default_factory=dict)
    block_hashes: Mapping[int, int | None] = field(default_factory=dict)
    tables: Mapping[int, tuple[int | None, ...]] = field(default_factory=dict)
    table_tokens: Mapping[int, Tokens] = field(default_factory=dict)
    cached: Mapping[Dev, frozenset[int]] | None = None
    evictable: Mapping[Dev, frozenset[int]] | None = None
    refcounts: Mapping[int, int] | None = None
    evictor: EvictorState | None = None  # evictor level (models.families.v0.evictor_model)
    refcount: RefcountState | None = None  # refcount level (models.families.v0.refcount_model)
    # each live block handle's ``Block.extra_hash`` (API.md §vLLM 1), for
    # targets whose allocate calls take ``extra_hash``; None for other targets.
    block_extras: Mapping[int, int | None] | None = None
    #: each live block handle's ``num_tokens_total`` (API.md 3: the tokens of its chain up
    #: to and including it), for prefix-caching targets; None for others.
    block_totals: Mapping[int, int] | None = None
    #: per device with prefix caching, the ``metric_data`` window fields in
    #: ``models.families.v0.hit_window.FIELDS`` order, for targets whose allocators show them.
    metric: Mapping[Dev, tuple[object, ...]] | None = None


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
