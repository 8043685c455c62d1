"""Trace record and replay in the operation vocabulary.

:class:`RecordingAllocator` wraps any ``DeviceAwareBlockAllocator`` and proxies it and the
block objects it returns (:class:`RecordedBlock`), so engine code such as ``BlockTable`` runs
on top of it unchanged, while every state-changing call, and every query the vocabulary has,
is written as one JSON line: ``{"op": <op_to_json>, "outcome": <outcome_to_json>}`` after a
header line ``{"trace": ..., "config": {...}}``. Handles are numbered the way the runner
numbers them (creation order, successful calls only), and copy-on-write pairs are drained after
every call into that call's outcome, then handed to the engine at its own
``clear_copy_on_writes()``, so the engine sees exactly what the bare allocator would show.

Pure queries outside the vocabulary (free counts, refcounts, admission estimates,
``get_common_computed_block_ids``) are forwarded and not recorded; state changes the
vocabulary cannot express (a mutable block with an extra key) raise :class:`TraceError`.

:func:`replay` runs a trace against a target under the oracle: every step is judged, and a
step whose success, or number of new handles, differs from the recording ends the replay as a
divergence (later handles would no longer line up).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.error_classes import builtin_classes
from models.families.v0.operations import (
    JSON,
    Dev,
    ErrorKind,
    Op,
    Outcome,
    op_from_json,
    op_to_json,
    outcome_from_json,
    outcome_to_json,
)
from models.families.v0.oracle import Oracle, OutOfContract
from prefixcache.interfaces import Block, DeviceAwareBlockAllocator
from prefixcache.utils import Device
from properties.core.targets import Target
from properties.families.v0.runner import Runner

FORMAT = "prefixcache-trace"
VERSION = 1
T = TypeVar("T")


class TraceError(Exception):
    """The call cannot be expressed in the vocabulary, or the trace file is malformed."""


_OUTCOME_DEFAULTS = outcome_to_json(Outcome())


def compact_outcome(outcome: Outcome) -> dict[str, JSON]:
    """``outcome_to_json`` without the fields left at their defaults (``outcome_from_json``
    restores them)."""
    return {k: v for k, v in outcome_to_json(outcome).items() if v != _OUTCOME_DEFAULTS[k]}


def _dev(device: Any) -> Dev:
    name = getattr(device, "name", None)
    if name not in ("GPU", "CPU"):
        raise TraceError(f"unknown device {device!r}")
    return Dev[name]


class RecordedBlock(Block):
    """A block handed out by a :class:`RecordingAllocator`: the inner block plus its handle.
    Reads go to the inner block; ``append_token_ids`` is recorded."""

    __slots__ = ("_handle", "_inner", "_recorder")

    def __init__(self, inner: Block, handle: int, recorder: RecordingAllocator) -> None:
        self._inner = inner
        self._handle = handle
        self._recorder = recorder

    @property
    def handle(self) -> int:
        return self._handle

    @property
    def inner(self) -> Block:
        return self._inner

    def append_token_ids(self, token_ids: list[int]) -> None:
        self._recorder._append(self, token_ids)

    @property
    def block_id(self) -> int | None:
        return self._inner.block_id

    @block_id.setter
    def block_id(self, value: int | None) -> None:
        self._inner.block_id = value

    @property
    def token_ids(self) -> list[int]:
        return self._inner.token_ids

    @property
    def num_tokens_total(self) -> int:
        return self._inner.num_tokens_total

    @property
    def num_empty_slots(self) -> int:
        return self._inner.num_empty_slots

    @property
    def is_full(self) -> bool:
        return self._inner.is_full

    @property
    def prev_block(self) -> Block | None:
        prev = self._inner.prev_block
        return None if prev is None else self._recorder._proxy_of(prev)

    @property
    def extra_hash(self) -> int | None:
        return self._inner.extra_hash

    @property
    def computed(self) -> bool:
        return self._inner.computed

    @computed.setter
    def computed(self, value: bool) -> None:
        self._inner.computed = value

    @property
    def last_accessed(self) -> float:
        return self._inner.last_accessed

    @last_accessed.setter
    def last_accessed(self, last_accessed_ts: float) -> None:
        self._inner.last_accessed = last_accessed_ts

    @property
    def content_hash(self) -> int | None:
        return self._inner.content_hash

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"RecordedBlock(b{self._handle}, {self._inner!r})"


@dataclass
class Entry:
    """One recorded step."""

    op: Op
    outcome: Outcome


class RecordingAllocator(DeviceAwareBlockAllocator):
    """Records the calls made on ``inner`` (see the module docstring).

    ``block_size`` is needed for the trace header (allocators do not all expose it);
    ``misuse_types`` classifies typed errors; ``sink`` receives each JSON line as it happens.
    """

    def __init__(self, inner: Any, block_size: int, *,
                 misuse_types: Sequence[type[BaseException]] = (),
                 sink: IO[str] | None = None, describe: str = "") -> None:
        self._inner = inner
        self.config = {
            "block_size": block_size,
            "num_gpu_blocks": int(inner.get_num_total_blocks(Device.GPU)),
            "num_cpu_blocks": int(inner.get_num_total_blocks(Device.CPU)),
        }
        self._misuse = tuple(misuse_types)
        self._sink = sink
        self._next_handle = 0
        self._live: dict[int, RecordedBlock] = {}  # id(inner block) -> live proxy
        self._pending_cows: list[tuple[int, int]] = []
        self.entries: list[Entry] = []
        self.header: dict[str, JSON] = {"trace": FORMAT, "version": VERSION,
                                        "config": self.config, "allocator": describe}
        if sink is not None:
            sink.write(json.dumps(self.header) + "\n")

    # ------------------------------------------------------------------ bookkeeping

    def _wrap(self, inner: Block) -> RecordedBlock:
        proxy = RecordedBlock(inner, self._next_handle, self)
        self._next_handle += 1
        self._live[id(inner)] = proxy
        return proxy

    def _proxy_of(self, block: Block) -> Block:
        return self._live.get(id(block), block)

    def _handle(self, block: Block) -> int:
        if isinstance(block, RecordedBlock):
            return block.handle
        proxy = self._live.get(id(block))
        if proxy is None:
            raise TraceError(f"{block!r} was not handed out by this recorder")
        return proxy.handle

    def _unwrap(self, block: Block | None) -> Any:
        return block.inner if isinstance(block, RecordedBlock) else block

    def _handles_of_ids(self, block_ids: Iterable[int], dev: Dev | None = None) -> list[int] | None:
        """A live handle holding each id (on ``dev`` if given), or None if one has none."""
        by_id: dict[int, int] = {}
        for proxy in self._live.values():
            bid = proxy.block_id
            if bid is not None and (dev is None or self._device_of(bid) is dev):
                by_id.setdefault(bid, proxy.handle)
        out = []
        for bid in block_ids:
            if bid not in by_id:
                return None
            out.append(by_id[bid])
        return out

    def _device_of(self, block_id: int) -> Dev:
        return Dev.GPU if block_id < self.config["num_gpu_blocks"] else Dev.CPU

    def _classify(self, exc: BaseException) -> ErrorKind:
        if "NoFreeBlocksError" in {c.__name__ for c in type(exc).__mro__}:
            return ErrorKind.NO_FREE_BLOCKS
        if self._misuse and isinstance(exc, self._misuse):
            return ErrorKind.MISUSE
        if isinstance(exc, AssertionError):
            return ErrorKind.ASSERTION
        return ErrorKind.UNEXPECTED

    def _drain(self, op: Op) -> tuple[tuple[int, int], ...]:
        if not op.mutates or isinstance(op, ops.ClearCopyOnWrites):
            return ()
        pairs = tuple((int(s), int(d)) for s, d in self._inner.clear_copy_on_writes())
        self._pending_cows.extend(pairs)
        return pairs

    def _emit(self, op: Op, outcome: Outcome) -> None:
        self.entries.append(Entry(op, outcome))
        if self._sink is not None:
            line = {"op": op_to_json(op), "outcome": compact_outcome(outcome)}
            self._sink.write(json.dumps(line) + "\n")

    def _call(self, op: Op, call: Callable[[], T], *,
              value: Callable[[T], JSON] | None = None,
              creates: Callable[[T], list[Block]] | None = None) -> tuple[T, list[RecordedBlock]]:
        try:
            result = call()
        except Exception as exc:
            self._emit(op, Outcome(error=self._classify(exc),
                                   detail=f"{type(exc).__name__}: {exc}", cows=self._drain(op),
                                   builtins=builtin_classes(exc)))
            raise
        made = [self._wrap(b) for b in creates(result)] if creates is not None else []
        self._emit(op, Outcome(value=None if value is None else value(result),
                               new_blocks=tuple(p.handle for p in made), cows=self._drain(op)))
        return result, made

    # ------------------------------------------------------------------ recorded calls

    def allocate_mutable_block(self, prev_block: Block | None, device: Device,
                               extra_hash: int | None = None) -> Block:
        prev = None if prev_block is None else self._handle(prev_block)
        op = ops.AllocateMutable(prev, _dev(device), extra_hash)
        kwargs = {} if extra_hash is None else {"extra_hash": extra_hash}
        _, made = self._call(op, lambda: self._inner.allocate_mutable_block(
            self._unwrap(prev_block), device=device, **kwargs), creates=lambda b: [b])
        return made[0]

    def allocate_immutable_block(self, prev_block: Block | None, token_ids: list[int],
                                 device: Device, extra_hash: int | None = None) -> Block:
        prev = None if prev_block is None else self._handle(prev_block)
        op = ops.AllocateImmutable(prev, tuple(token_ids), _dev(device), extra_hash)
        kwargs = {} if extra_hash is None else {"extra_hash": extra_hash}
        _, made = self._call(op, lambda: self._inner.allocate_immutable_block(
            self._unwrap(prev_block), token_ids, device=device, **kwargs), creates=lambda b: [b])
        return made[0]

    def allocate_immutable_blocks(self, prev_block: Block | None,
                                  block_token_ids: list[list[int]], device: Device,
                                  extra_hash: int | None = None) -> list[Block]:
        prev = None if prev_block is None else self._handle(prev_block)
        chunks = tuple(tuple(c) for c in block_token_ids)
        op = ops.AllocateImmutableChain(prev, chunks, _dev(device), extra_hash)
        kwargs = {} if extra_hash is None else {"extra_hash": extra_hash}
        _, made = self._call(op, lambda: self._inner.allocate_immutable_blocks(
            self._unwrap(prev_block), block_token_ids, device=device, **kwargs),
            creates=lambda blocks: list(blocks))
        return list(made)

    def _append(self, block: RecordedBlock, token_ids: list[int]) -> None:
        op = ops.Append(block.handle, tuple(token_ids))
        self._call(op, lambda: block.inner.append_token_ids(token_ids))

    def free(self, block: Block) -> None:
        if not isinstance(block, RecordedBlock) and id(block) not in self._live:
            self._inner.free(block)  # the null block: freeing it is a no-op, not an operation
            return
        handle = self._handle(block)
        inner = self._unwrap(block)
        self._call(ops.Free(handle), lambda: self._inner.free(inner))
        if self._live.get(id(inner)) is not None and self._live[id(inner)].handle == handle:
            del self._live[id(inner)]

    def fork(self, last_block: Block) -> list[Block]:
        op = ops.Fork(self._handle(last_block))
        _, made = self._call(op, lambda: self._inner.fork(self._unwrap(last_block)),
                             creates=lambda blocks: list(blocks))
        return list(made)

    def swap(self, blocks: list[Block], src_device: Device,
             dst_device: Device) -> dict[int, int]:
        op = ops.Swap(tuple(self._handle(b) for b in blocks), _dev(src_device), _dev(dst_device))
        inner = [self._unwrap(b) for b in blocks]
        mapping, _ = self._call(op, lambda: self._inner.swap(inner, src_device, dst_device),
                                value=lambda m: [[int(s), int(d)] for s, d in m.items()])
        return dict(mapping)

    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None:
        handles = self._handles_of_ids(block_ids)
        if handles is None:
            raise TraceError("mark_blocks_as_accessed with an id no recorded block holds")
        self._call(ops.MarkAccessed(tuple(handles), now),
                   lambda: self._inner.mark_blocks_as_accessed(block_ids, now))

    def mark_blocks_as_computed(self, block_ids: list[int]) -> None:
        # The argument is ignored by contract; keep it when every id maps to a handle.
        handles = self._handles_of_ids(block_ids) or []
        self._call(ops.MarkComputed(tuple(handles)),
                   lambda: self._inner.mark_blocks_as_computed(block_ids))

    def clear_copy_on_writes(self) -> list[tuple[int, int]]:
        self._call(ops.ClearCopyOnWrites(), lambda: None, value=lambda _: [])
        pairs = self._pending_cows + [(int(s), int(d))
                                      for s, d in self._inner.clear_copy_on_writes()]
        self._pending_cows = []
        return pairs

    def get_computed_block_ids(self, prev_computed_block_ids: list[int], block_ids: list[int],
                               skip_last_block_id: bool) -> list[int]:
        handles = self._handles_of_ids(block_ids, Dev.GPU)

        def call() -> list[int]:
            return list(self._inner.get_computed_block_ids(prev_computed_block_ids, block_ids,
                                                           skip_last_block_id))

        if prev_computed_block_ids or handles is None:
            return call()
        op = ops.ComputedBlockIds(tuple(handles), skip_last_block_id)
        result, _ = self._call(op, call, value=lambda r: [int(i) for i in r])
        return list(result)

    def get_num_blocks_touched(self, blocks: list[Block], device: Device,
                               num_lookahead_slots: int = 0) -> int:
        op = ops.CountTouched(tuple(self._handle(b) for b in blocks), _dev(device),
                              num_lookahead_slots)
        inner = [self._unwrap(b) for b in blocks]
        result, _ = self._call(op, lambda: self._inner.get_num_blocks_touched(
            inner, device, num_lookahead_slots), value=int)
        return int(result)

    def get_num_full_blocks_touched(self, blocks: list[Block], device: Device) -> int:
        op = ops.CountFullTouched(tuple(self._handle(b) for b in blocks), _dev(device))
        inner = [self._unwrap(b) for b in blocks]
        result, _ = self._call(op, lambda: self._inner.get_num_full_blocks_touched(
            inner, device), value=int)
        return int(result)

    def find_cached_blocks_prefix(self, block_hashes: list[int],
                                  device: Device = Device.GPU) -> list[int]:
        by_hash = {p.content_hash: p.handle for p in self._live.values()
                   if p.content_hash is not None}

        def call() -> list[int]:
            return list(self._inner.find_cached_blocks_prefix(block_hashes, device))

        if any(h not in by_hash for h in block_hashes):
            return call()
        op = ops.CachedPrefix(tuple(by_hash[h] for h in block_hashes), _dev(device))
        result, _ = self._call(op, call, value=list)
        return list(result)

    def get_prefix_cache_hit_rate(self, device: Device) -> float:
        result, _ = self._call(ops.HitRate(_dev(device)),
                               lambda: self._inner.get_prefix_cache_hit_rate(device), value=float)
        return float(result)

    def reset_prefix_cache(self, device: Device | None = None) -> bool:
        op = ops.ResetPrefixCache(None if device is None else _dev(device))
        args = () if device is None else (device,)
        result, _ = self._call(op, lambda: self._inner.reset_prefix_cache(*args), value=bool)
        return bool(result)

    def allocate_or_get_null_block(self) -> Block:
        result, _ = self._call(ops.GetNullBlock(), self._inner.allocate_or_get_null_block,
                               value=lambda b: int(b.block_id))
        block: Block = result
        return block

    # ------------------------------------------------------------------ forwarded queries

    def get_num_free_blocks(self, device: Device) -> int:
        return int(self._inner.get_num_free_blocks(device))

    def get_num_total_blocks(self, device: Device) -> int:
        return int(self._inner.get_num_total_blocks(device))

    @property
    def all_block_ids(self) -> frozenset[int]:
        return frozenset(self._inner.all_block_ids)

    def get_common_computed_block_ids(self, computed_seq_block_ids: list[list[int]]) -> list[int]:
        return list(self._inner.get_common_computed_block_ids(computed_seq_block_ids))

    def get_physical_block_id(self, device: Device, absolute_id: int) -> int:
        return int(self._inner.get_physical_block_id(device, absolute_id))

    def get_block_refcount(self, block_id: int) -> int:
        return int(self._inner.get_block_refcount(block_id))

    def get_block_device(self, block_id: int) -> Device:
        device: Device = self._inner.get_block_device(block_id)
        return device

    def get_num_free_blocks_needed(self, prev_block: Block | None,
                                   block_token_ids: Sequence[Sequence[int]], device: Device,
                                   extra_hash: int | None = None) -> int:
        return int(self._inner.get_num_free_blocks_needed(
            self._unwrap(prev_block), block_token_ids, device, extra_hash))

    @property
    def null_block(self) -> Block | None:
        block: Block | None = getattr(self._inner, "null_block", None)
        return block

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


# --------------------------------------------------------------------------- files


def write_trace(path: Path, recorder: RecordingAllocator) -> None:
    lines = [json.dumps(recorder.header)]
    lines += [json.dumps({"op": op_to_json(e.op), "outcome": compact_outcome(e.outcome)})
              for e in recorder.entries]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@dataclass
class Trace:
    header: dict[str, JSON]
    entries: list[Entry]

    @property
    def config(self) -> dict[str, int]:
        cfg = self.header.get("config")
        if not isinstance(cfg, dict):
            raise TraceError("trace header has no config")
        return {k: int(cfg[k]) for k in ("block_size", "num_gpu_blocks", "num_cpu_blocks")}


def read_trace(path: Path) -> Trace:
    """Parse a JSON Lines trace (header line, then one step per line)."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise TraceError(f"{path}: empty trace")
    header = json.loads(lines[0])
    if not isinstance(header, dict) or header.get("trace") != FORMAT:
        raise TraceError(f"{path}: not a {FORMAT} file")
    entries = []
    for number, line in enumerate(lines[1:], start=2):
        data = json.loads(line)
        try:
            entries.append(Entry(op_from_json(data["op"]), outcome_from_json(data["outcome"])))
        except (KeyError, ValueError, TypeError) as exc:
            raise TraceError(f"{path}:{number}: {exc}") from exc
    return Trace(header, entries)


# --------------------------------------------------------------------------- replay


@dataclass
class Replay:
    """How a trace replayed: steps judged, and the first violation, divergence or contract
    exit."""

    steps: int = 0
    violation: Violation | None = None
    divergence: str | None = None
    out_of_contract: str | None = None
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.violation is None and self.divergence is None \
            and self.out_of_contract is None


def replay(trace: Trace, target: Target) -> Replay:
    """Run ``trace`` against ``target`` under the oracle."""
    config = Config(caps=target.caps, **trace.config)
    oracle = Oracle(config)
    result = Replay()
    try:  # a misbehaving factory is a verdict too
        runner = Runner(target, config)
        oracle.initial_check(runner.snapshot())
    except Violation as violation:
        result.violation = violation
        return result
    for index, entry in enumerate(trace.entries):
        outcome, snapshot = runner.execute(entry.op)
        result.outcomes.append(outcome)
        result.steps = index + 1
        try:
            oracle.step(entry.op, outcome, snapshot)
        except Violation as violation:
            result.violation = violation.at(entry.op, index)
            return result
        except OutOfContract as why:
            result.out_of_contract = f"step {index}: {why}"
            return result
        recorded = entry.outcome
        if (outcome.error is None) != (recorded.error is None) or \
                len(outcome.new_blocks) != len(recorded.new_blocks):
            result.divergence = (f"step {index} {entry.op.kind}: recorded "
                                 f"{recorded.error.value if recorded.error else 'success'} "
                                 f"with {len(recorded.new_blocks)} new handle(s), replayed "
                                 f"{outcome.error.value if outcome.error else 'success'} with "
                                 f"{len(outcome.new_blocks)}")
            return result
    return result
