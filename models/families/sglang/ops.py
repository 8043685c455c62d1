"""The SGLang family's operations, as a scheduler issues them, and their JSON form.

A request's life: ``Arrive`` (match its prompt, lock the matched node, evict if the free
slots fall short, allocate slots for the rest of its page-aligned tokens and compute their KV)
then ``Finish`` (insert its tokens with ``prev_prefix_len`` = what it matched, release the
lock; ``hold``: match again and lock the inserted node, as a request kept for its next turn
does, until ``Unlock``). ``Evict`` and ``Match`` are bare tree calls. Requests are numbered by
their ``Arrive``, refused ones included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class Arrive:
    """A request with ``tokens`` in namespace ``extra_key`` is scheduled."""

    kind: ClassVar[str] = "arrive"
    tokens: tuple[int, ...]
    extra_key: str | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    """Request ``req`` is inserted and releases its lock. ``hold``: it keeps a lock on its
    inserted node. ``prev_zero``: it passes ``prev_prefix_len=0`` (its whole value, the tree's
    own matched slots included)."""

    kind: ClassVar[str] = "finish"
    req: int
    hold: bool = False
    prev_zero: bool = False


@dataclass(frozen=True, slots=True)
class Unlock:
    """A held request releases its lock."""

    kind: ClassVar[str] = "unlock"
    req: int


@dataclass(frozen=True, slots=True)
class ReleaseWindow:
    """Request ``req`` (running or held) releases the SWA part of its lock only, as a request
    whose decoding has passed the sliding window does (``release_swa``); its full lock stays
    until it finishes or unlocks (FULL + SWA configurations only)."""

    kind: ClassVar[str] = "release_swa"
    req: int


@dataclass(frozen=True, slots=True)
class Evict:
    """``evict(EvictParams(num_tokens, swa_num_tokens))`` (``swa_num_tokens``: SWA KV to drop,
    FULL + SWA configurations only)."""

    kind: ClassVar[str] = "evict"
    num_tokens: int
    swa_num_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Match:
    """A bare ``match_prefix`` (a scheduler's prefix lookup)."""

    kind: ClassVar[str] = "match"
    tokens: tuple[int, ...]
    extra_key: str | None = None


Op = Arrive | Finish | Unlock | Evict | Match | ReleaseWindow
OP_TYPES = (Arrive, Finish, Unlock, Evict, Match, ReleaseWindow)


def op_to_json(op: Op) -> dict[str, Any]:
    if isinstance(op, Arrive | Match):
        out: dict[str, Any] = {"op": op.kind, "tokens": list(op.tokens)}
        if op.extra_key is not None:
            out["extra_key"] = op.extra_key
        return out
    if isinstance(op, Finish):
        out = {"op": op.kind, "req": op.req}
        if op.hold:
            out["hold"] = True
        if op.prev_zero:
            out["prev_zero"] = True
        return out
    if isinstance(op, Unlock | ReleaseWindow):
        return {"op": op.kind, "req": op.req}
    out = {"op": op.kind, "num_tokens": op.num_tokens}
    if op.swa_num_tokens:
        out["swa_num_tokens"] = op.swa_num_tokens
    return out


def op_from_json(data: Mapping[str, Any]) -> Op:
    kind = data.get("op")
    if kind in (Arrive.kind, Match.kind):
        cls = Arrive if kind == Arrive.kind else Match
        extra = data.get("extra_key")
        return cls(tuple(int(t) for t in data["tokens"]),
                   None if extra is None else str(extra))
    if kind == Finish.kind:
        return Finish(int(data["req"]), bool(data.get("hold", False)),
                      bool(data.get("prev_zero", False)))
    if kind == Unlock.kind:
        return Unlock(int(data["req"]))
    if kind == ReleaseWindow.kind:
        return ReleaseWindow(int(data["req"]))
    if kind == Evict.kind:
        return Evict(int(data["num_tokens"]), int(data.get("swa_num_tokens", 0)))
    raise ValueError(f"not an SGLang operation: {data!r}")


@dataclass(frozen=True, slots=True)
class TreeConfig:
    """The pool: ``pages`` pages of ``page_size`` slots (``size = pages * page_size``). With a
    sliding ``window`` > 0 the cache is FULL + SWA: a second pool of ``swa_pages`` pages holds
    the sliding-window KV (``swa_size``); ``window`` 0 is the FULL component alone."""

    pages: int
    page_size: int
    window: int = 0
    swa_pages: int = 0

    @property
    def size(self) -> int:
        return self.pages * self.page_size

    @property
    def swa_size(self) -> int:
        return self.swa_pages * self.page_size
