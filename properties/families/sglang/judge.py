"""The SGLang family's judge: one operation in, run on a fresh tree of the target the way a
scheduler runs it and checked against :class:`models.families.sglang.model.TreeModel` call by
call; the outcome out, or a located :class:`~models.core.invariants.Violation`. The allocator
level's and the request level's operations run themselves (:mod:`.slots`, :mod:`.requests`);
after every operation the free list, the sizes and every running request's row are read."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from models.core.invariants import Violation
from models.families.sglang.invariants import SGLangInvariants as F
from models.families.sglang.model import OutOfContract, Request, TreeModel
from models.families.sglang.ops import Arrive, Evict, Finish, Op, ReleaseWindow, TreeConfig, Unlock
from properties.families.sglang import requests
from properties.families.sglang.requests import REQUEST_OPS, RequestOp
from properties.families.sglang.slots import SLOT_OPS, SlotOp


@dataclass(slots=True)
class Step:
    """One operation the judge ran, and what it came to (or the error the target raised)."""

    op: Op | SlotOp | RequestOp
    outcome: Any = None


@dataclass(frozen=True, slots=True)
class Arrived:
    """An ``Arrive``'s outcome: request ``req`` matched ``matched`` tokens and got ``slots``
    (None: refused, too few slots even after eviction)."""

    req: int
    matched: int
    slots: tuple[int, ...] | None


@dataclass
class TreeJudge:
    """A fresh tree of ``create`` (``(size, page_size) -> driver``) and the model; ``spec``,
    ``name`` and ``misuse_types`` are the target's (for the allocator level's probes)."""

    create: Callable[[int, int], Any]
    config: TreeConfig
    log: list[Step] = field(default_factory=list)
    spec: str = ""
    name: str = ""
    misuse_types: tuple[type[BaseException], ...] = ()
    #: The request level's driver handles, by request number.
    handles: dict[int, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.model = TreeModel(self.config)
        self.receipts: dict[int, Any] = {}
        self.tree = self._call("construction", self.create, self.config.size,
                               self.config.page_size)
        self._check_pool()

    def step(self, op: Op | SlotOp | RequestOp) -> Any:
        index = len(self.log)
        entry = Step(op)
        self.log.append(entry)
        try:
            entry.outcome = self._step(op)
            self._check_pool()
        except Violation as violation:
            raise violation.at(op, index) from None
        return entry.outcome

    # ------------------------------------------------------------------ operations

    def fresh(self) -> Any:
        """Another tree of the target with the run's pool shape (for misuse probes)."""
        return self.create(self.config.size, self.config.page_size)

    def _step(self, op: Op | SlotOp | RequestOp) -> Any:
        if isinstance(op, SLOT_OPS + REQUEST_OPS):  # these levels: each operation runs itself
            return op.run(self)
        if isinstance(op, Arrive):
            return self._arrive(op)
        if isinstance(op, Finish):
            return self._finish(op)
        if isinstance(op, Unlock):
            req = self.model.request(op.req, "held")
            self._unlock(op.req, req)
            req.state = "done"
            return None
        if isinstance(op, Evict):
            return self._evict(op.num_tokens)
        if isinstance(op, ReleaseWindow):
            raise OutOfContract("release_swa needs a sliding window (a FULL + SWA tree)")
        return self._match(op.tokens, op.extra_key)[0]

    def _match(self, tokens: Sequence[int], extra_key: str | None) -> tuple[int, Any, Any]:
        got = self._call("match_prefix", self.tree.match, list(tokens), extra_key)
        length, node, slots = got
        model_node = self.model.check_match(tokens, extra_key, int(length), list(slots))
        return int(length), node, model_node

    def _lock(self, req: int, request: Request, node: Any, model_node: Any, length: int) -> None:
        if length == 0:  # the root: nothing to lock
            request.node = None
            return
        self.receipts[req] = self._call("lock", self.tree.lock, node)
        self.model.tree.lock(model_node)
        request.node = model_node

    def _unlock(self, req: int, request: Request) -> None:
        if request.node is None:
            return
        self._call("unlock", self.tree.unlock, self.receipts.pop(req))
        self.model.tree.unlock(request.node)
        request.node = None

    def _evict(self, num_tokens: int) -> int:
        evicted, freed = self._call("evict", self.tree.evict, num_tokens)
        self.model.check_evict(num_tokens, int(evicted), Counter(freed))
        return int(evicted)

    def _arrive(self, op: Arrive) -> Arrived:
        m = self.model
        req = len(m.requests)
        m.requests.append(None)
        matched, node, model_node = self._match(op.tokens, op.extra_key)
        slots = list(m.tree.path_slots(model_node))
        request = Request(op.tokens, op.extra_key, matched, slots, None)
        self._lock(req, request, node, model_node, matched)
        need = len(m.tree.aligned(op.tokens)) - matched
        available = self._call("available_size", self.tree.available_size)
        if available != len(m.free):
            raise Violation(F.OWN, "available_size counts the free slots",
                            expected=len(m.free), observed=available)
        if available < need:
            self._evict(need - available)
        fresh = self.model.check_alloc(need, self._call("alloc", self.tree.alloc, need)
                                       if need else [])
        if fresh is None:
            self._unlock(req, request)
            return Arrived(req, matched, None)
        m.compute(op.tokens, op.extra_key, matched, fresh)
        request.slots = slots + fresh
        m.requests[req] = request
        return Arrived(req, matched, tuple(request.slots))

    def _finish(self, op: Finish) -> int:
        request = self.model.request(op.req, "running")
        prev = 0 if op.prev_zero else request.matched
        aligned = self.model.tree.aligned(request.tokens)
        prefix_len = self._call("insert", self.tree.insert, aligned, list(request.slots),
                                request.extra_key, prev) if aligned else 0
        self.model.check_insert(request, prev, int(prefix_len))
        self._unlock(op.req, request)
        request.state = "done"
        if op.hold:
            length, node, model_node = self._match(request.tokens, request.extra_key)
            self._lock(op.req, request, node, model_node, length)
            request.state = "held" if request.node is not None else "done"
        return int(prefix_len)

    # ------------------------------------------------------------------ helpers

    def _call(self, what: str, method: Callable[..., Any], *args: Any) -> Any:
        try:
            return method(*args)
        except Violation:
            raise
        except Exception as exc:
            if self.log:
                self.log[-1].outcome = exc
            raise Violation(F.CRASH, f"{what} raised {type(exc).__name__}: {exc}") from exc

    def _check_pool(self) -> None:
        tree = self.tree
        free = self._call("the allocator's free list", tree.free_slots)
        available = self._call("available_size", tree.available_size)
        evictable, protected, total = self._call("sizes", tree.sizes)
        self.model.check_pool(Counter(free), int(available),
                              (int(evictable), int(protected), int(total)))
        if self.handles:
            requests.check_rows(self)
