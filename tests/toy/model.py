"""The toy family's specification: its invariants, its operations and the judge that runs one
operation on a :class:`~tests.toy.allocator.ToyCache`-like target and on the model.

The model keeps what the engine knows: which request holds which ids, and a shadow KV memory
(``kv[id]``: the key whose KV the id holds, written when a request got the id fresh, since the
engine then computes that block's KV into it). What the target may choose (which free id,
which cached block to evict) is open; what it reports is checked against the model:

- ``CONTENT``: a reused block holds exactly the request's prefix KV; ``lookup`` counts only
  blocks that do.
- ``CACHE``: every cached key names a block holding that key's KV.
- ``HIT``: ``allocate`` reuses the whole cached run of full blocks ``lookup`` reports.
- ``RC``: each id's reference count is the number of live requests holding it.
- ``LEAK``: ``num_free`` counts every id no live request holds; no id is handed to two
  requests unless it is a shared cached block.
- ``ATOMIC``: a refused call changes nothing; ``CRASH``: only the contract's errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from models.core.invariants import Invariant, Invariants, Violation


class ToyInvariants(Invariants):
    """The toy family's set: the core's universal invariants and four of its own."""

    RC = Invariant("RC", "each block's reference count is the number of requests holding it")
    LEAK = Invariant("LEAK", "num_free counts exactly the blocks no request holds")
    CACHE = Invariant("CACHE", "every cached key names a block holding that key's KV")
    HIT = Invariant("HIT", "allocate reuses the whole cached prefix that lookup reports")


F = ToyInvariants


class OutOfContract(Exception):
    """A program the toy model cannot judge (it names a request never made)."""


@dataclass(frozen=True, slots=True)
class ToyConfig:
    """The pool shape."""

    num_blocks: int
    block_size: int


@dataclass(frozen=True, slots=True)
class Allocate:
    """A request arrives with ``tokens``; it becomes request number ``len(requests)``."""

    kind: ClassVar[str] = "allocate"
    tokens: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Free:
    """Request ``req`` finishes: its blocks are freed, once."""

    kind: ClassVar[str] = "free"
    req: int


@dataclass(frozen=True, slots=True)
class Lookup:
    """How many leading tokens of ``tokens`` are cached."""

    kind: ClassVar[str] = "lookup"
    tokens: tuple[int, ...]


Op = Allocate | Free | Lookup
OPS: dict[str, type[Allocate] | type[Free] | type[Lookup]] = {
    c.kind: c for c in (Allocate, Free, Lookup)}


def op_to_json(op: Op) -> dict[str, Any]:
    if isinstance(op, Free):
        return {"op": op.kind, "req": op.req}
    return {"op": op.kind, "tokens": list(op.tokens)}


def op_from_json(data: Mapping[str, Any]) -> Op:
    kind = data.get("op")
    if kind == Free.kind:
        return Free(int(data["req"]))
    if kind in (Allocate.kind, Lookup.kind):
        return OPS[kind](tuple(int(t) for t in data["tokens"]))  # type: ignore[call-arg]
    raise ValueError(f"not a toy operation: {data!r}")


@dataclass(slots=True)
class Step:
    """One operation the judge ran, and what the target returned (or the error it raised)."""

    op: Op
    outcome: Any


@dataclass
class ToyJudge:
    """A fresh target allocator and the model, side by side (see the module docstring)."""

    factory: Any
    config: ToyConfig
    log: list[Step] = field(default_factory=list)
    requests: list[list[int] | None] = field(default_factory=list)
    kv: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.alloc = self.factory(self.config.num_blocks, self.config.block_size)
        self._check(None)

    def step(self, op: Op) -> Any:
        index = len(self.log)
        try:
            outcome = self._step(op)
        except Violation as violation:
            raise violation.at(op, index) from None
        self._check(op, index)
        return outcome

    # ------------------------------------------------------------------ operations

    def _step(self, op: Op) -> Any:
        if isinstance(op, Lookup):
            return self._lookup(op)
        if isinstance(op, Free):
            return self._free(op)
        return self._allocate(op)

    def _lookup(self, op: Lookup) -> int:
        got = self._call(op, self.alloc.lookup, list(op.tokens))
        want = self._cached_prefix(op.tokens)
        if got != want * self.config.block_size:
            raise Violation(F.HIT, "lookup counts the cached run of full blocks",
                            expected=want * self.config.block_size, observed=got)
        return got

    def _free(self, op: Free) -> None:
        if not 0 <= op.req < len(self.requests):
            raise OutOfContract(f"free names request {op.req}; the program made "
                                f"{len(self.requests)}")
        ids = self.requests[op.req]
        if ids is None:  # the cache cannot tell a second free from another holder's
            raise OutOfContract(f"request {op.req} is freed twice")
        self._call(op, self.alloc.free, list(ids))
        self.requests[op.req] = None
        return None

    def _allocate(self, op: Allocate) -> list[int] | None:
        bs = self.config.block_size
        hits = self._cached_prefix(op.tokens)
        blocks = -(-len(op.tokens) // bs)
        cached = self.alloc.cached_blocks()
        hit_ids = [cached[op.tokens[:(i + 1) * bs]] for i in range(hits)]
        held = self._held()
        reusable = sum(1 for b in set(hit_ids) if b not in held)
        if blocks - hits > self.alloc.num_free() - reusable:
            return self._refused(op, self.alloc.allocate, list(op.tokens))
        ids = self._call(op, self.alloc.allocate, list(op.tokens))
        if not isinstance(ids, list) or not all(type(b) is int for b in ids):
            raise Violation(F.TARGET, "allocate returns a list of int ids", observed=ids)
        if len(ids) != blocks:
            raise Violation(F.LEAK, "allocate returns one id per block", expected=blocks,
                            observed=ids)
        if ids[:hits] != hit_ids:
            raise Violation(F.HIT, "allocate reuses the cached prefix's blocks",
                            expected=hit_ids, observed=ids[:hits])
        fresh = ids[hits:]
        if len(set(ids)) != len(ids) or any(b in held or not 0 <= b < self.config.num_blocks
                                            for b in fresh):
            raise Violation(F.LEAK, "fresh blocks are distinct, in range and held by no one",
                            observed=ids, expected=f"none of {sorted(held)}")
        for i, block in enumerate(ids):
            key = op.tokens[:(i + 1) * bs]
            if i < hits:
                if self.kv.get(block) != key:
                    raise Violation(F.CONTENT, f"reused block {block} holds other KV",
                                    expected=key, observed=self.kv.get(block))
            else:
                self.kv[block] = key  # the engine computes this block's KV into it
        self.requests.append(ids)
        return ids

    # ------------------------------------------------------------------ helpers

    def _call(self, op: Op, method: Any, *args: Any) -> Any:
        try:
            outcome = method(*args)
        except Exception as exc:
            self.log.append(Step(op, exc))
            raise Violation(F.CRASH, f"{op.kind} raised {type(exc).__name__}: {exc}") from exc
        self.log.append(Step(op, outcome))
        return outcome

    def _refused(self, op: Op, method: Any, *args: Any) -> None:
        before = self._state()
        try:
            method(*args)
        except Exception as exc:
            self.log.append(Step(op, exc))
            if not type(exc).__name__.startswith("Toy"):
                raise Violation(F.CRASH, f"{op.kind} must be refused with a toy error, "
                                f"raised {type(exc).__name__}: {exc}") from exc
            if self._state() != before:
                raise Violation(F.ATOMIC, f"a refused {op.kind} changed the cache",
                                expected=before, observed=self._state()) from None
            return None
        self.log.append(Step(op, None))
        raise Violation(F.ATOMIC, f"{op.kind} must be refused, it went through")

    def _state(self) -> tuple[Any, ...]:
        refs = {b: self.alloc.ref_count(b) for b in range(self.config.num_blocks)}
        return self.alloc.num_free(), refs, self.alloc.cached_blocks()

    def _held(self) -> set[int]:
        return {b for ids in self.requests if ids is not None for b in ids}

    def _cached_prefix(self, tokens: tuple[int, ...]) -> int:
        """The cached run of full blocks at the start of ``tokens`` whose KV is right."""
        cached = self.alloc.cached_blocks()
        bs, n = self.config.block_size, 0
        while (n + 1) * bs <= len(tokens):
            block = cached.get(tokens[:(n + 1) * bs])
            if block is None or self.kv.get(block) != tokens[:(n + 1) * bs]:
                break
            n += 1
        return n

    def _check(self, op: Op | None, index: int = 0) -> None:
        """What must hold after every step, whatever it was."""
        where = (lambda v: v) if op is None else (lambda v: v.at(op, index))
        holders: dict[int, int] = {}
        for ids in self.requests:
            for block in set(ids or ()):
                holders[block] = holders.get(block, 0) + 1
        for block in range(self.config.num_blocks):
            if self.alloc.ref_count(block) != holders.get(block, 0):
                raise where(Violation(F.RC, f"block {block}'s reference count",
                                      expected=holders.get(block, 0),
                                      observed=self.alloc.ref_count(block)))
        free = self.config.num_blocks - len(holders)
        if self.alloc.num_free() != free:
            raise where(Violation(F.LEAK, "num_free counts the blocks no request holds",
                                  expected=free, observed=self.alloc.num_free()))
        for key, block in self.alloc.cached_blocks().items():
            if self.kv.get(block) != key:
                raise where(Violation(F.CACHE, f"cached key names block {block}, which "
                                      "holds other KV", expected=key,
                                      observed=self.kv.get(block)))
