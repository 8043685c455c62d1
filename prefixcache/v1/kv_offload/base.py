"""Types of the offload interface (upstream ``vllm/v1/kv_offload/base.py``, 0.34.0 names).

``OffloadKey`` is a block hash followed by its KV-cache group index (4 bytes, big endian).
``ReqContext`` carries per-request state the manager keeps between calls (keyed by type) and
the end-token position of each key, which orders a request's keys head to tail.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any, NamedTuple, NewType, TypeVar

__all__ = [
    "LoadStoreSpec",
    "LookupResult",
    "Medium",
    "OffloadKey",
    "OffloadPolicy",
    "OffloadingEvent",
    "PrepareStoreOutput",
    "ReqContext",
    "RequestOffloadingContext",
    "ScheduleEndContext",
    "get_offload_block_hash",
    "get_offload_group_idx",
    "make_offload_key",
]

OffloadKey = NewType("OffloadKey", bytes)

_T = TypeVar("_T")


def make_offload_key(block_hash: bytes, group_idx: int) -> OffloadKey:
    """Pack a block hash and a group index (0 <= idx < 2**32) into a key."""
    return OffloadKey(block_hash + group_idx.to_bytes(4, "big", signed=False))


def get_offload_block_hash(key: OffloadKey) -> bytes:
    """The block hash of ``key``."""
    return key[:-4]


def get_offload_group_idx(key: OffloadKey) -> int:
    """The KV-cache group index of ``key``."""
    return int.from_bytes(key[-4:], "big", signed=False)


class Medium(Enum):
    """Storage medium of a tier."""

    CPU = "CPU"
    STORAGE = "STORAGE"


class LookupResult(Enum):
    """Result of ``lookup``: ``HIT`` stored and readable, ``HIT_PENDING`` its write is still in
    flight, ``MISS`` absent; ``RETRY`` is for asynchronous tiers (never returned by the CPU
    tier)."""

    MISS = auto()
    HIT = auto()
    HIT_PENDING = auto()
    RETRY = auto()


class OffloadPolicy(Enum):
    """Which of a request's chunks a tier wants offloaded."""

    CHUNK_LEVEL = "chunk_level"
    REQUEST_LEVEL = "request_level"


@dataclass
class RequestOffloadingContext:
    """What ``on_new_request`` answers."""

    policy: OffloadPolicy = OffloadPolicy.CHUNK_LEVEL


class ScheduleEndContext(NamedTuple):
    """Per-step scheduling information passed to ``on_schedule_end``."""

    new_req_ids: Collection[str]
    preempted_req_ids: Collection[str]


@dataclass
class ReqContext:
    """Per-request state: scratch space keyed by value type, and key positions."""

    req_id: str
    kv_transfer_params: dict[str, Any] | None = None
    _state: dict[type, Any] = field(default_factory=dict, repr=False, init=False)
    _offload_key_positions: dict[OffloadKey, int] = field(
        default_factory=dict, repr=False, init=False)

    def set_state(self, val: Any) -> None:
        self._state[type(val)] = val

    def get_state(self, cls: type[_T]) -> _T | None:
        value: _T | None = self._state.get(cls)
        return value

    def set_offload_key_position(self, key: OffloadKey, end_token: int) -> None:
        self._offload_key_positions[key] = end_token

    def get_offload_key_position(self, key: OffloadKey) -> int | None:
        return self._offload_key_positions.get(key)

    @property
    def offload_key_positions(self) -> Mapping[OffloadKey, int]:
        """Every key's end-token position (a live, read-only view for bulk lookups)."""
        return self._offload_key_positions


class LoadStoreSpec:
    """Where a worker reads or writes the chunks of one transfer."""


@dataclass
class PrepareStoreOutput:
    """What ``prepare_store`` answers: keys to write (in offer order), where, and the keys
    evicted to make room."""

    keys_to_store: list[OffloadKey]
    store_spec: LoadStoreSpec
    evicted_keys: list[OffloadKey]


@dataclass
class OffloadingEvent:
    """Keys stored (``removed`` False) or removed; ``metadata_only`` removals release keys that
    were never announced as stored (a failed write)."""

    keys: list[OffloadKey]
    medium: Medium
    removed: bool
    removal_expected: bool = False
    metadata_only: bool = False
    req_context: ReqContext | None = field(default=None, repr=False, compare=False)


def replay_events(events: Iterable[OffloadingEvent], keys: set[OffloadKey] | None = None
                  ) -> set[OffloadKey]:
    """The set of served keys a consumer rebuilds from ``events`` (in order), starting from
    ``keys`` (default: empty)."""
    served = set() if keys is None else keys
    for event in events:
        if event.removed:
            served.difference_update(event.keys)
        else:
            served.update(event.keys)
    return served
