"""The vocabulary of BlockPool operations (the v1 family's programs).

Blocks are named by ``block_id``; requests by their index in the program's request list
(:class:`Req`, content only: the target hashes it). A program is a list of these records; it
is what reproducers print and what the xfails file stores (``to_json``/``from_json``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class Op:
    """Base of every operation; ``name`` is its tag in JSON programs."""

    name: ClassVar[str] = ""

    @property
    def kind(self) -> str:
        """The operation kind, as the core's signatures and ``match.ops`` rules read it."""
        return self.name

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.name}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple | frozenset) else value
        return out


@dataclass(frozen=True, slots=True)
class Req(Op):
    """Create request ``len(requests)``: tokens plus the extra inputs that key its blocks.

    ``mm``: (identifier, offset, length) items, sorted and disjoint; ``embeds``: prompt-embeds
    bytes (one per token) or None.
    """

    name: ClassVar[str] = "request"
    tokens: tuple[int, ...]
    lora: int | None = None
    salt: str | None = None
    mm: tuple[tuple[str, int, int], ...] = ()
    embeds: bytes | None = None

    def to_json(self) -> dict[str, Any]:
        out = Op.to_json(self)
        out["mm"] = [list(m) for m in self.mm]
        out["embeds"] = None if self.embeds is None else self.embeds.hex()
        return out


@dataclass(frozen=True, slots=True)
class GetNew(Op):
    name: ClassVar[str] = "get_new_blocks"
    n: int


@dataclass(frozen=True, slots=True)
class Touch(Op):
    name: ClassVar[str] = "touch"
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Free(Op):
    """``free_blocks(ids)`` in the given order (engines pass a request's blocks reversed);
    ``evict_first`` (0.34's flag, for blocks another tier already holds) queues keyed blocks
    at the head too."""

    name: ClassVar[str] = "free_blocks"
    ids: tuple[int, ...]
    evict_first: bool = False

    def to_json(self) -> dict[str, Any]:
        out = Op.to_json(self)
        if not self.evict_first:  # programs written before the flag read the same
            del out["evict_first"]
        return out


@dataclass(frozen=True, slots=True)
class Unpin(Op):
    """``unpin_blocks(ids, on_reuse)``: one reference fewer per id; a block reaching 0 joins
    the queue tail (keyed or not) and stays readable until ``on_reuse`` reports it handed out
    again (or the cache reset). Engines unpin a table's pages tail first."""

    name: ClassVar[str] = "unpin_blocks"
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MoveHashes(Op):
    """``move_block_hashes(src, dst)``: every key of ``src`` now reaches the keyless ``dst``
    (a private copy: copy-on-write of a block its request keeps writing)."""

    name: ClassVar[str] = "move_block_hashes"
    src: int
    dst: int


@dataclass(frozen=True, slots=True)
class EmitCached(Op):
    """``emit_cached_block_events(request, num_cached, block_size, group)``: re-announce the
    request's first ``num_cached`` blocks (prefix hits) as ``BlockStored``; no state change."""

    name: ClassVar[str] = "emit_cached_block_events"
    req: int
    num_cached: int
    group: int


@dataclass(frozen=True, slots=True)
class CacheFull(Op):
    """``cache_full_blocks(request, blocks, num_cached, num_full, block_size, group, mask)``;
    ``mask`` (aligned with the new full blocks) leaves the False ones out of the map."""

    name: ClassVar[str] = "cache_full_blocks"
    req: int
    ids: tuple[int, ...]
    num_cached: int
    num_full: int
    group: int
    mask: tuple[bool, ...] | None = None


@dataclass(frozen=True, slots=True)
class CachePartial(Op):
    """``cache_partial_block(request, block, num_tokens, group, block_size)``; ``replace``:
    ``replace_existing_hashes=True`` (the block's contents were overwritten)."""

    name: ClassVar[str] = "cache_partial_block"
    req: int
    id: int
    num_tokens: int
    group: int
    replace: bool = False

    def to_json(self) -> dict[str, Any]:
        out = Op.to_json(self)
        if not self.replace:  # the programs written before the flag was drawn stay as they were
            del out["replace"]
        return out


@dataclass(frozen=True, slots=True)
class Lookup(Op):
    """``get_cached_block(request.block_hashes[index], groups)`` (hash-block granularity)."""

    name: ClassVar[str] = "get_cached_block"
    req: int
    index: int
    groups: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Evict(Op):
    name: ClassVar[str] = "evict_blocks"
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Reset(Op):
    name: ClassVar[str] = "reset_prefix_cache"


@dataclass(frozen=True, slots=True)
class TakeEvents(Op):
    name: ClassVar[str] = "take_events"


@dataclass(frozen=True, slots=True)
class Probe(Op):
    """Misuse ``misuse`` (one of the machine's misuse kinds) with argument ``arg``, applied to a
    copy of the pool (``Executor.probe``): neither the pool nor the model changes; the outcome
    is the robustness finding, if any. Fuzz programs draw it; a violation it raises (untyped
    error, broken atomicity) replays like any other step."""

    name: ClassVar[str] = "misuse_probe"
    misuse: str
    arg: int


OPS: dict[str, type[Op]] = {
    c.name: c
    for c in (Req, GetNew, Touch, Free, CacheFull, CachePartial, Lookup, Evict, Reset, TakeEvents,
              Probe, Unpin, MoveHashes, EmitCached)
}


def from_json(record: dict[str, Any]) -> Op:
    """The operation a JSON record (``to_json``) describes."""
    data = dict(record)
    cls = OPS[data.pop("op")]
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        value = data.get(f.name)
        if f.name == "mm":
            value = tuple(tuple(m) for m in value or ())
        elif f.name == "embeds" and value is not None:
            value = bytes.fromhex(value)
        elif isinstance(value, list):
            value = tuple(value)
        if f.name in data or f.name in ("mm", "embeds"):
            kwargs[f.name] = value
    return cls(**kwargs)


def program_json(program: list[Op]) -> list[dict[str, Any]]:
    return [op.to_json() for op in program]


__all__ = ["OPS", "CacheFull", "CachePartial", "EmitCached", "Evict", "Free", "GetNew", "Lookup",
           "MoveHashes", "Op", "Probe", "Req", "Reset", "TakeEvents", "Touch", "Unpin", "asdict",
           "from_json", "program_json"]
