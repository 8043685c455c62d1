"""The offload tier's operations (what the connector's scheduler side calls), its pool shape,
and their JSON form.

Keys are small integers ``0 .. NUM_KEYS - 1`` standing for offload keys: key ``i`` is the block
hash ``bytes([i + 1]) * 8`` in KV-cache group ``group(i)`` (keys ``6`` and ``7`` in group 1),
and sits at end-token position ``position(i)`` in every request that has positions. Requests
are named by integers; a job (a store or load in flight) by its request and its keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

NUM_KEYS = 8
#: Keys from this index on belong to KV-cache group 1.
SECOND_GROUP = 6


def group(key: int) -> int:
    """The KV-cache group of key ``key``."""
    return int(key >= SECOND_GROUP)


def position(key: int) -> int:
    """The end-token position of key ``key`` in a request that has positions."""
    return 16 * (key + 1)


def block_hash(key: int) -> bytes:
    """The block hash of key ``key``."""
    return bytes([key + 1]) * 8


def key_bytes(key: int) -> bytes:
    """The offload key of ``key``: its block hash, then its group index (4 bytes, big endian);
    the LRU policy breaks rank ties by these bytes."""
    return block_hash(key) + group(key).to_bytes(4, "big")


@dataclass(frozen=True, slots=True)
class OffloadConfig:
    """The tier's shape: ``num_chunks`` chunk slots, the admission threshold and tracker size,
    and whether it records events."""

    num_chunks: int
    store_threshold: int = 1
    max_tracker_size: int = 64_000
    events: bool = True


@dataclass(frozen=True, slots=True)
class NewRequest:
    """Request ``req`` arrives (``on_new_request``); ``positions``: its context gives every key
    its end-token position (a request first named elsewhere has positions)."""

    kind: ClassVar[str] = "new_request"
    req: int
    positions: bool = True


@dataclass(frozen=True, slots=True)
class Lookup:
    """The scheduler asks whether ``key`` is offloaded (for request ``req``)."""

    kind: ClassVar[str] = "lookup"
    req: int
    key: int


@dataclass(frozen=True, slots=True)
class PrepareLoad:
    """Request ``req`` starts loading ``keys`` (each a HIT) back to the GPU."""

    kind: ClassVar[str] = "prepare_load"
    req: int
    keys: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CompleteLoad:
    """The workers finished request ``req``'s load of ``keys``."""

    kind: ClassVar[str] = "complete_load"
    req: int
    keys: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PrepareStore:
    """Request ``req`` offers ``keys`` (distinct) for offloading."""

    kind: ClassVar[str] = "prepare_store"
    req: int
    keys: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CompleteStore:
    """The workers finished writing request ``req``'s store of ``keys`` (the keys the prepare
    answered), successfully or not."""

    kind: ClassVar[str] = "complete_store"
    req: int
    keys: tuple[int, ...]
    success: bool = True


@dataclass(frozen=True, slots=True)
class Finish:
    """Request ``req`` finished (``on_request_finished``)."""

    kind: ClassVar[str] = "finish"
    req: int


@dataclass(frozen=True, slots=True)
class Reset:
    """The prefix cache is reset (``reset_cache``): transfers in flight are abandoned by the
    scheduler, though the workers may still be running them."""

    kind: ClassVar[str] = "reset"


@dataclass(frozen=True, slots=True)
class Flushed:
    """The workers finished every transfer in flight at the last reset (``on_reset_flushed``
    where the tier has it)."""

    kind: ClassVar[str] = "flushed"


@dataclass(frozen=True, slots=True)
class TakeEvents:
    """The connector drains the tier's events (``take_events``)."""

    kind: ClassVar[str] = "take_events"


Op = (NewRequest | Lookup | PrepareLoad | CompleteLoad | PrepareStore | CompleteStore | Finish
      | Reset | Flushed | TakeEvents)
OP_TYPES: tuple[type[Any], ...] = (NewRequest, Lookup, PrepareLoad, CompleteLoad, PrepareStore,
                                   CompleteStore, Finish, Reset, Flushed, TakeEvents)
BY_KIND: dict[str, type[Any]] = {cls.kind: cls for cls in OP_TYPES}
#: The operations whose jobs run on the workers (the ones a reset abandons).
JOB_KINDS = ("prepare_load", "prepare_store")


def op_to_json(op: Op) -> dict[str, Any]:
    """``{"op": kind, field: value, ...}`` (key tuples as lists)."""
    out: dict[str, Any] = {"op": op.kind}
    for spec in fields(op):
        value = getattr(op, spec.name)
        out[spec.name] = list(value) if isinstance(value, tuple) else value
    return out


def op_from_json(data: Mapping[str, Any]) -> Op:
    """The operation of ``op_to_json``'s form; ``ValueError`` if it is not one."""
    cls = BY_KIND.get(str(data.get("op")))
    if cls is None:
        raise ValueError(f"not an offload operation: {data!r}")
    kwargs: dict[str, Any] = {}
    for spec in fields(cls):
        if spec.name not in data:
            continue
        value = data[spec.name]
        if spec.name == "keys":
            kwargs[spec.name] = tuple(int(k) for k in value)
        elif spec.type in ("bool", bool):
            kwargs[spec.name] = bool(value)
        else:
            kwargs[spec.name] = int(value)
    op: Op = cls(**kwargs)
    return op
