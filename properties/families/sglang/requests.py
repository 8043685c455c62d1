"""The SGLang family's request level: a request's life as SGLang's scheduler drives the
cache's request API (``docs/CONTRACT.md``, SGLang, the request level; the model:
:mod:`models.families.sglang.requests`).

One operation, one place: each class holds its fields and JSON form, what it calls on the
target's driver and how the model judges the answer (``run``), and the line that replays it
(``line``, over :data:`PRELUDE`'s helpers). A driver with the request API
(``requests``: True) has ``req_open(tokens, extra_key)`` (a new waiting request's handle),
``req_admit(handle)`` (the scheduler's admission: match all its tokens, lock the match, take
a row, write the matched slots: ``(matched, slots)``), ``req_extend(handle, n)`` /
``req_decode(handle, token)`` (the next ``n`` positions' slots, ``alloc`` or
``alloc_extend`` / ``alloc_decode``, written into the row, their KV computed; None when
refused), ``req_checkpoint(handle)`` (publish what it computed), ``req_release(handle,
checkpoint)`` (finish with ``checkpoint``, preempt without) and ``req_row(handle)`` (the
row's computed positions).

* :class:`Admit`: a new request with its prompt is admitted.
* :class:`Chunk`: a prefill chunk of ``tokens`` tokens is computed (``publish``: then the
  computed prefix is checkpointed, as for every chunk but a prompt's last).
* :class:`Decode`: one sampled token, its slot and its KV.
* :class:`Preempt`: the request is retracted (``release_kv_cache(checkpoint=False)``).
* :class:`Resume`: a preempted request is admitted again with its prompt and outputs.
* :class:`Complete`: the request finishes (``release_kv_cache(checkpoint=True)``).

Before a chunk or a decode step allocates, the scheduler evicts what the free slots lack.
After every operation the judge reads every running request's row back
(:func:`check_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from models.families.sglang import requests as model
from models.families.sglang.model import OutOfContract, TreeModel
from models.families.sglang.ops import TreeConfig

__all__ = ["KINDS", "PRELUDE", "REQUEST_OPS", "Admit", "Admitted", "Chunk", "Complete",
           "Decode", "Preempt", "RequestOp", "Resume", "check_rows", "from_json"]


#: Requests running or waiting at once (the driver's request rows are more).
LIVE = 8


class Judging(Protocol):
    """What an operation of this level uses of the family's judge."""

    config: TreeConfig
    model: TreeModel
    tree: Any
    handles: dict[int, Any]

    def _call(self, what: str, method: Any, *args: Any) -> Any: ...

    def _evict(self, num_tokens: int) -> int: ...


@dataclass(frozen=True, slots=True)
class Admitted:
    """An admission's outcome: request ``req`` matched ``matched`` tokens."""

    req: int
    matched: int


def _needs(judge: Judging) -> None:
    if not getattr(judge.tree, "requests", False):
        raise OutOfContract("this target's driver has no request API")


def _admit(judge: Judging, req: int, request: model.Running) -> Admitted:
    m = judge.model
    length, slots = judge._call("admission (match_prefix, lock, row)", judge.tree.req_admit,
                                judge.handles[req])
    node = m.check_match(request.tokens, request.extra_key, int(length), list(slots))
    model.admit(m, request, node, int(length))
    return Admitted(req, int(length))


def _make_room(judge: Judging, request: model.Running, tokens: int) -> None:
    """The scheduler evicts what the free slots lack for ``tokens`` more positions."""
    ps = judge.config.page_size
    have = request.computed
    need = (-(-(have + tokens) // ps) - -(-have // ps)) * ps
    available = int(judge._call("available_size", judge.tree.available_size))
    if available < need:
        judge._evict(need - available)


@dataclass(frozen=True, slots=True)
class Admit:
    """A new request with prompt ``tokens`` in namespace ``extra_key`` is admitted; its
    outcome is :class:`Admitted` (requests are numbered with the tree level's)."""

    kind: ClassVar[str] = "admit"
    tokens: tuple[int, ...]
    extra_key: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.kind, "tokens": list(self.tokens)}
        if self.extra_key is not None:
            out["extra_key"] = self.extra_key
        return out

    def run(self, judge: Judging) -> Admitted:
        _needs(judge)
        if not self.tokens:
            raise OutOfContract("a request has a prompt")
        m = judge.model
        live = sum(isinstance(r, model.Running) and r.state != "done" for r in m.requests)
        if live >= LIVE:
            raise OutOfContract(f"at most {LIVE} requests are running or waiting at once")
        req = len(m.requests)
        m.requests.append(None)
        judge.handles[req] = judge._call("a new request", judge.tree.req_open,
                                         list(self.tokens), self.extra_key)
        request = model.Running(self.tokens, self.extra_key, 0, [], None, prompt=len(self.tokens))
        m.requests[req] = request
        return _admit(judge, req, request)

    def line(self, config: TreeConfig) -> str:
        extra = f", {self.extra_key!r}" if self.extra_key is not None else ""
        return f"admit({list(self.tokens)}{extra})"


@dataclass(frozen=True, slots=True)
class Chunk:
    """A prefill chunk: request ``req``'s next ``tokens`` tokens (at most what is left) get
    slots and their KV; ``publish``: then ``checkpoint(req, up_to=computed)``. The outcome
    is the new slots, None when refused (after evicting)."""

    kind: ClassVar[str] = "chunk"
    req: int
    tokens: int
    publish: bool = True

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.kind, "req": self.req, "tokens": self.tokens}
        if not self.publish:
            out["publish"] = False
        return out

    def run(self, judge: Judging) -> list[int] | None:
        _needs(judge)
        m = judge.model
        request = model.running(m, self.req)
        left = len(request.tokens) - request.computed
        n = min(self.tokens, left)
        if n <= 0:
            raise OutOfContract(f"request {self.req} has nothing left to prefill")
        _make_room(judge, request, n)
        handle = judge.handles[self.req]
        got = judge._call("alloc_extend", judge.tree.req_extend, handle, n)
        start = request.computed
        fresh = model.grow(m, request, request.tokens[start:start + n],
                           None if got is None else [int(s) for s in got])
        if fresh is None:
            return None
        if self.publish:
            judge._call("checkpoint", judge.tree.req_checkpoint, handle)
            model.checkpoint(m, request, request.computed)
        return fresh

    def line(self, config: TreeConfig) -> str:
        return f"chunk({self.req}, {self.tokens}, {self.publish})"


@dataclass(frozen=True, slots=True)
class Decode:
    """A decode step of request ``req`` (its prompt computed): ``token`` is sampled, gets a
    slot and its KV. The outcome is the slot, None when refused (after evicting)."""

    kind: ClassVar[str] = "decode"
    req: int
    token: int

    def to_json(self) -> dict[str, Any]:
        return {"op": self.kind, "req": self.req, "token": self.token}

    def run(self, judge: Judging) -> int | None:
        _needs(judge)
        m = judge.model
        request = model.running(m, self.req)
        if request.computed < len(request.tokens):
            raise OutOfContract(f"request {self.req} is still prefilling")
        _make_room(judge, request, 1)
        got = judge._call("alloc_decode", judge.tree.req_decode, judge.handles[self.req],
                          self.token)
        fresh = model.grow(m, request, (self.token,), None if got is None else [int(got)])
        return None if fresh is None else fresh[0]

    def line(self, config: TreeConfig) -> str:
        return f"decode({self.req}, {self.token})"


@dataclass(frozen=True, slots=True)
class Preempt:
    """Request ``req`` is retracted: ``release_kv_cache(req, checkpoint=False)``."""

    kind: ClassVar[str] = "preempt"
    req: int

    def to_json(self) -> dict[str, Any]:
        return {"op": self.kind, "req": self.req}

    def run(self, judge: Judging) -> None:
        _needs(judge)
        request = model.running(judge.model, self.req)
        if not request.computed:  # upstream takes the row with the first chunk's slots
            raise OutOfContract(f"request {self.req} holds no KV yet: nothing to retract")
        judge._call("release_kv_cache(checkpoint=False)", judge.tree.req_release,
                    judge.handles[self.req], False)
        model.release(judge.model, request, publish=False)

    def line(self, config: TreeConfig) -> str:
        return f"preempt({self.req})"


@dataclass(frozen=True, slots=True)
class Resume:
    """Preempted request ``req`` is admitted again with its prompt and outputs so far."""

    kind: ClassVar[str] = "resume"
    req: int

    def to_json(self) -> dict[str, Any]:
        return {"op": self.kind, "req": self.req}

    def run(self, judge: Judging) -> Admitted:
        _needs(judge)
        return _admit(judge, self.req, model.running(judge.model, self.req, "waiting"))

    def line(self, config: TreeConfig) -> str:
        return f"resume({self.req})"


@dataclass(frozen=True, slots=True)
class Complete:
    """Request ``req`` finishes: ``release_kv_cache(req, checkpoint=True)`` (0.5.18:
    ``cache_finished_req(req)``)."""

    kind: ClassVar[str] = "complete"
    req: int

    def to_json(self) -> dict[str, Any]:
        return {"op": self.kind, "req": self.req}

    def run(self, judge: Judging) -> None:
        _needs(judge)
        request = model.running(judge.model, self.req)
        judge._call("release_kv_cache(checkpoint=True)", judge.tree.req_release,
                    judge.handles[self.req], True)
        model.release(judge.model, request, publish=True)

    def line(self, config: TreeConfig) -> str:
        return f"complete({self.req})"


RequestOp = Admit | Chunk | Decode | Preempt | Resume | Complete
REQUEST_OPS = (Admit, Chunk, Decode, Preempt, Resume, Complete)
KINDS = {cls.kind: cls for cls in REQUEST_OPS}


def check_rows(judge: Judging) -> None:
    """After every operation: each running request's row, read back from the target."""
    m = judge.model
    for req, request in enumerate(m.requests):
        if isinstance(request, model.Running) and request.state == "running":
            row = judge._call("the request's row", judge.tree.req_row, judge.handles[req])
            model.check_row(m, req, request, row)


def from_json(data: Mapping[str, Any]) -> RequestOp:
    kind = data.get("op")
    if kind == Admit.kind:
        extra = data.get("extra_key")
        return Admit(tuple(int(t) for t in data["tokens"]), None if extra is None else str(extra))
    if kind == Chunk.kind:
        return Chunk(int(data["req"]), int(data["tokens"]), bool(data.get("publish", True)))
    if kind == Decode.kind:
        return Decode(int(data["req"]), int(data["token"]))
    if kind == Preempt.kind:
        return Preempt(int(data["req"]))
    if kind == Resume.kind:
        return Resume(int(data["req"]))
    if kind == Complete.kind:
        return Complete(int(data["req"]))
    raise ValueError(f"not an SGLang request-level operation: {data!r}")


#: The reproducer's helpers for this level: the scheduler's part, over the driver (a program
#: of this level admits its requests in order, so ``handles[req]`` is request ``req``).
PRELUDE = '''
handles = []


def make_room(req, tokens):
    """evict what the free slots lack for `tokens` more positions of the row."""
    have = len(tree.req_row(handles[req]))
    need = (-(-(have + tokens) // PAGE) - -(-have // PAGE)) * PAGE
    if tree.available_size() < need:
        print("evict", tree.evict(need - tree.available_size()))


def admit(tokens, extra_key=None):
    """a new request: match its prompt, lock the match, take a row."""
    handles.append(tree.req_open(tokens, extra_key))
    print("admit", tree.req_admit(handles[-1]))


def chunk(req, tokens, publish):
    """a prefill chunk (at most what is left), then checkpoint(req, up_to=computed)."""
    left = len(tree.req_tokens(handles[req])) - len(tree.req_row(handles[req]))
    make_room(req, min(tokens, left))
    got = tree.req_extend(handles[req], min(tokens, left))
    print("chunk", got)
    if got is not None and publish:
        tree.req_checkpoint(handles[req])


def decode(req, token):
    make_room(req, 1)
    print("decode", tree.req_decode(handles[req], token))


def preempt(req):
    tree.req_release(handles[req], False)


def resume(req):
    print("resume", tree.req_admit(handles[req]))


def complete(req):
    tree.req_release(handles[req], True)
'''
