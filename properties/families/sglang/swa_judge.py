"""The SGLang family's FULL + SWA judge: :class:`~properties.families.sglang.judge.TreeJudge`
on a tree with a sliding window, checked against
:class:`models.families.sglang.swa.SWAModel` call by call.

The scheduler's calls are the FULL level's, with the window's needs: an arriving request
evicts full KV for what the full pool lacks and SWA KV for what the SWA pool lacks (one
``evict`` call with both counts), then allocates a full slot and an SWA slot per new token;
every match's window, every insert's frees and every eviction's two free lists are read off
the target (the driver's ``swa_of``, ``swa_free_slots``) and judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from models.core.invariants import Violation
from models.families.sglang.invariants import SGLangInvariants as F
from models.families.sglang.model import OutOfContract, Request
from models.families.sglang.ops import Arrive, Evict, Finish, Op, ReleaseWindow
from models.families.sglang.swa import SWAModel
from properties.families.sglang.judge import Arrived, TreeJudge
from properties.families.sglang.requests import REQUEST_OPS, RequestOp
from properties.families.sglang.slots import SLOT_OPS, Probe, SlotOp


class SWATreeJudge(TreeJudge):
    """See the module docstring (``create``: ``(size, page_size, swa_size, window)``)."""

    model: SWAModel

    def __post_init__(self) -> None:
        self.model = SWAModel(self.config)
        self.receipts: dict[int, Any] = {}
        c = self.config
        self.tree = self._call("construction", self.create, c.size, c.page_size, c.swa_size,
                               c.window)
        self._check_pool()

    def fresh(self) -> Any:
        c = self.config
        create: Any = self.create
        return create(c.size, c.page_size, c.swa_size, c.window)

    def _step(self, op: Op | SlotOp | RequestOp) -> Any:
        if isinstance(op, REQUEST_OPS):
            raise OutOfContract("the request level is judged with the FULL component alone")
        if isinstance(op, Probe):  # misuse on a fresh FULL + SWA tree
            return op.run(self)
        if isinstance(op, SLOT_OPS):
            raise Violation(F.CRASH, "the allocator level is not part of the FULL + SWA "
                            "configuration")
        if isinstance(op, Evict):
            return self._evict_both(op.num_tokens, op.swa_num_tokens)
        if isinstance(op, ReleaseWindow):
            return self._release_window(op.req)
        return super()._step(op)

    def _release_window(self, req: int) -> None:
        """Request ``req`` (running or held, with a lock) releases its lock's SWA part."""
        m = self.model
        if not 0 <= req < len(m.requests) or m.requests[req] is None:
            raise OutOfContract(f"request {req} was never made or was refused")
        request = m.requests[req]
        if request is None or request.node is None or request.swa_released:
            raise OutOfContract(f"request {req} holds no lock whose window is locked")
        full, swa = self.tree.free_slots(), self.tree.swa_free_slots()
        self._call("release_swa", self.tree.release_swa, self.receipts[req])
        m.check_swa_release(request, self.tree.free_slots() - full,
                            self.tree.swa_free_slots() - swa)

    def _match(self, tokens: Sequence[int], extra_key: str | None) -> tuple[int, Any, Any]:
        length, node, slots = self._call("match_prefix", self.tree.match, list(tokens),
                                         extra_key)
        slots = [int(s) for s in slots]
        window = slots[max(0, int(length) - self.config.window):int(length)]
        peers = self._call("the full->SWA mapping", self.tree.swa_of, window)
        model_node = self.model.check_swa_match(tokens, extra_key, int(length), slots,
                                                [int(p) for p in peers])
        return int(length), node, model_node

    def _evict(self, num_tokens: int) -> int:
        return self._evict_both(num_tokens, 0)

    def _evict_both(self, num_tokens: int, swa_num_tokens: int) -> int:
        evicted, swa_evicted, freed, freed_swa = self._call(
            "evict", self.tree.evict, num_tokens, swa_num_tokens)
        self.model.check_swa_evict(num_tokens, swa_num_tokens, int(evicted), int(swa_evicted),
                                   Counter(freed), Counter(freed_swa))
        if int(swa_evicted) < swa_num_tokens:  # short: nothing it counts evictable is left
            left = int(self._call("swa sizes", self.tree.swa_sizes)[0])
            if left:
                raise Violation(F.SWA, f"evict(swa_num_tokens={swa_num_tokens}) stops with "
                                f"{left} SWA tokens it counts evictable",
                                expected=swa_num_tokens, observed=int(swa_evicted))
        return int(evicted)

    def _arrive(self, op: Arrive) -> Arrived:
        m = self.model
        req = len(m.requests)
        m.requests.append(None)
        matched, node, model_node = self._match(op.tokens, op.extra_key)
        slots = list(m.tree.path_slots(model_node))
        request = Request(op.tokens, op.extra_key, matched, slots, None)
        m.requests[req] = request  # its lock's window counts from here on
        self._lock(req, request, node, model_node, matched)
        need = len(m.tree.aligned(op.tokens)) - matched
        full = self._call("available_size", self.tree.available_size)
        swa = self._call("swa_available_size", self.tree.swa_available_size)
        if (full, swa) != (len(m.free), len(m.swa_free)):
            raise Violation(F.SWA, "(available_size, swa_available_size) count the free full "
                            "and SWA slots", expected=(len(m.free), len(m.swa_free)),
                            observed=(full, swa))
        if full < need or swa < need:
            self._evict_both(max(0, need - full), max(0, need - swa))
        got = self._call("alloc", self.tree.alloc, need) if need else []
        peers = self._call("the full->SWA mapping", self.tree.swa_of, got) if got else []
        fresh = m.check_swa_alloc(need, got, len(m.free), [int(p) for p in peers])
        if fresh is None:
            self._unlock(req, request)
            m.requests[req] = None
            return Arrived(req, matched, None)
        m.compute(op.tokens, op.extra_key, matched, fresh)
        request.slots = slots + fresh
        return Arrived(req, matched, tuple(request.slots))

    def _finish(self, op: Finish) -> int:
        request = self.model.request(op.req, "running")
        prev = 0 if op.prev_zero else request.matched
        aligned = self.model.tree.aligned(request.tokens)
        full, swa = self.tree.free_slots(), self.tree.swa_free_slots()
        prefix_len = self._call("insert", self.tree.insert, aligned, list(request.slots),
                                request.extra_key, prev) if aligned else 0
        freed = self.tree.free_slots() - full
        freed_swa = self.tree.swa_free_slots() - swa
        self.model.check_swa_insert(request, prev, int(prefix_len), freed, freed_swa)
        self._unlock(op.req, request)
        request.state = "done"
        request.swa_released = False
        if op.hold:
            length, node, model_node = self._match(request.tokens, request.extra_key)
            self._lock(op.req, request, node, model_node, length)
            request.state = "held" if request.node is not None else "done"
        return int(prefix_len)

    def _check_pool(self) -> None:
        super()._check_pool()
        tree = self.tree
        free = self._call("the SWA free list", tree.swa_free_slots)
        available = self._call("swa_available_size", tree.swa_available_size)
        sizes = self._call("swa sizes", tree.swa_sizes)
        held = sorted(self.model.tree.slots())
        peers = self._call("the full->SWA mapping", tree.swa_of, held) if held else []
        self.model.check_swa_pool(Counter(free), int(available),
                                  (int(sizes[0]), int(sizes[1])), held,
                                  [int(p) for p in peers])
