"""The values operations are made of and judged by: devices, token lists, request keys
(:class:`ExtraKey`), error kinds, and what a target shows after a call (:class:`Outcome`,
:class:`Snapshot`). Plain data, no operation: the model's state modules import these, the
operations (``models.families.v0.ops``) build on them, and ``models.families.v0.operations``
re-exports them."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from models.core.records import record

Tokens: TypeAlias = tuple[int, ...]
JSON: TypeAlias = Any


class Dev(enum.Enum):
    """A device pool. GPU ids come first, then CPU ids (``CpuGpuBlockAllocator.create``)."""

    GPU = "gpu"
    CPU = "cpu"

    # Keys of per-device dicts read several times a step (never set members whose order
    # matters): the C-level identity hash instead of ``Enum.__hash__``'s hash of the name.
    __hash__ = object.__hash__


#: Every device, in ``Dev``'s order: iterating the enum class itself builds a generator
#: each time, and the runner reads both pools after every step.
DEVICES: tuple[Dev, ...] = tuple(Dev)


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


def frozen_literal(value: JSON) -> JSON:
    """A JSON literal with every list turned into a tuple (hashable, as ``Malformed.bad``)."""
    if isinstance(value, list | tuple):
        return tuple(frozen_literal(v) for v in value)
    return value



@record
class EvictorState:
    """What the evictor shows after a step: ``num_blocks``, and ``free_table`` as
    ``{block_id: (content_hash, num_hashed_tokens, last_accessed)}``."""

    num_blocks: int
    table: Mapping[int, tuple[int, int, float]]


@record
class RefcountState:
    """What the counter shows after a step: ``get(id)`` of each id it was built with;
    ``pending``: the tracker's recorded pairs (a non-destructive ``pending()``), for targets
    whose tracker has one (an extension, not in docs/API.md), else None."""

    counts: Mapping[int, int]
    pending: tuple[tuple[int | None, int | None], ...] | None = None


# --------------------------------------------------------------------------- results


@record
class Outcome:
    """What the target did for one operation.

    ``new_blocks``/``new_table`` are the handles the runner created (empty on failure);
    ``cows`` are the copy-on-write pairs drained right after the call, as an engine does every
    scheduling step; ``admitted`` is the allocator's own admission verdict for ``TableSwap``;
    ``builtins`` names the builtin exception classes the error is an instance of (docs/API.md pins
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


@record
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
    # each live block handle's ``Block.extra_hash`` (docs/API.md §12.1), for
    # targets whose allocate calls take ``extra_hash``; None for other targets.
    block_extras: Mapping[int, int | None] | None = None
    #: each live block handle's ``num_tokens_total`` (docs/API.md §3: the tokens of its chain up
    #: to and including it), for prefix-caching targets; None for others.
    block_totals: Mapping[int, int] | None = None
    #: per live table whose blocks expose ``num_tokens_total`` (prefix-caching targets), each
    #: block's value in table order (``None`` where the block does not define it: the null
    #: block of a sliding window); None when no table shows it.
    table_totals: Mapping[int, tuple[int | None, ...]] | None = None
    #: per device with prefix caching, the ``metric_data`` window fields in
    #: ``models.families.v0.hit_window.FIELDS`` order, for targets whose allocators show them.
    metric: Mapping[Dev, tuple[object, ...]] | None = None
    #: per device, each evictable id's (``last_accessed``, ``num_hashed_tokens``) as the
    #: evictor's own metadata shows them, for targets whose adapter can introspect them.
    evictable_ranks: Mapping[Dev, Mapping[int, tuple[object, object]]] | None = None
    #: per device, each active id's ``last_accessed`` as its tracker shows it, likewise.
    access_times: Mapping[Dev, Mapping[int, object]] | None = None
    #: the ids still shown by block objects the live tables let go of in this step (a table
    #: free, a window drop), each the very id the object had in its table: none is allowed but
    #: the null block's.
    dropped_ids: tuple[int | None, ...] = ()
