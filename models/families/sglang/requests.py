"""The SGLang family's request level: a running request's KV row over the tree model
(:class:`~models.families.sglang.model.TreeModel`), as SGLang's scheduler drives the cache's
request API (``docs/CONTRACT.md``, SGLang, the request level).

A :class:`Running` request's tokens are its prompt then its sampled outputs; its row
(``slots``) has a slot per computed token; the first ``matched`` (``cache_protected_len``)
positions are the tree's, the rest (its last page whole) the request's own, which the tree
model's ownership counts. KV is written into the shadow memory when a chunk or a decode step
computes it, never when a slot is allocated or published. Each function takes what the
target answered, raises a :class:`~models.core.invariants.Violation` or applies the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from models.core.invariants import Violation
from models.families.sglang.invariants import SGLangInvariants as F
from models.families.sglang.model import OutOfContract, Request, TreeModel
from models.families.sglang.tree import Node

__all__ = ["Running", "admit", "check_row", "checkpoint", "grow", "release", "running"]


@dataclass
class Running(Request):
    """A request at the request level: ``prompt`` tokens of ``tokens`` are its prompt; its
    row is ``slots`` (one per computed token); ``matched`` is its ``cache_protected_len``.
    ``state``: running -> waiting (preempted) -> running ... -> done."""

    prompt: int = 0

    @property
    def computed(self) -> int:
        return len(self.slots)


def running(model: TreeModel, req: int, state: str = "running") -> Running:
    """Request ``req`` at the request level, in ``state`` (out of contract otherwise)."""
    found = model.request(req, state)
    if not isinstance(found, Running):
        raise OutOfContract(f"request {req} is a tree-level request (arrive/finish)")
    return found


def admit(model: TreeModel, request: Running, node: Node, length: int) -> None:
    """Admission (again after a preemption): the match (checked by the caller) is locked; the
    row starts as the matched slots."""
    request.slots = model.tree.path_slots(node)[:length]
    request.matched = length
    request.node = node if length else None
    if length:
        model.tree.lock(node)
    request.state = "running"


def grow(model: TreeModel, request: Running, new_tokens: Sequence[int],
         got: Sequence[int] | None) -> list[int] | None:
    """The row grows by ``len(new_tokens)`` positions (a chunk, a decode step): the target
    answered ``got`` (None: refused, only when too few pages are free; see
    :meth:`TreeModel.check_row_extend`). Their KV is computed; ``new_tokens`` past the
    request's tokens are outputs it sampled."""
    start = request.computed
    fresh = model.check_row_extend(request.slots, len(new_tokens), got)
    if got is None:
        return None
    tokens = request.tokens[:start] + tuple(new_tokens)
    if len(tokens) > len(request.tokens):
        request.tokens = tokens
    model.compute(request.tokens, request.extra_key, start, fresh)
    request.slots = request.slots + fresh
    return fresh


def checkpoint(model: TreeModel, request: Running, up_to: int) -> None:
    """``checkpoint(req, up_to)``: insert the page-aligned first ``up_to`` tokens with
    ``prev_prefix_len`` = the protected length (duplicates freed), split at the prompt's end
    when outputs follow it, point the row at the tree's slots, move the lock."""
    ps = model.config.page_size
    aligned = up_to // ps * ps
    if aligned == 0:
        return
    tokens, protected = request.tokens[:aligned], request.matched
    done = model.tree.insert(tokens, request.slots[:aligned], request.extra_key, protected)
    for slot in done.duplicates:
        model.free.add(slot)
        model.kv.pop(slot, None)
    prompt = request.prompt // ps * ps
    if 0 < prompt < aligned:
        model.tree.insert(tokens[:prompt], model.tree.path_slots(done.node)[:prompt],
                          request.extra_key, prompt)
    path = model.tree.path_slots(done.node)
    request.slots = path + request.slots[aligned:]
    if request.node is not None:
        model.tree.unlock(request.node)
    model.tree.lock(done.node)
    request.node = done.node
    request.matched = aligned


def release(model: TreeModel, request: Running, publish: bool) -> None:
    """``release_kv_cache(req, checkpoint=publish)``: publish first when asked (a finish),
    then the row's own part goes back to the free list (its pages, once), the lock is
    released; a finished request is done, a preempted one waits with its tokens."""
    if publish:
        checkpoint(model, request, request.computed)
    for slot in model.pages_of(request.slots[request.matched:]):
        model.free.add(slot)
        model.kv.pop(slot, None)
    if request.node is not None:
        model.tree.unlock(request.node)
    request.node = None
    request.slots, request.matched = [], 0
    request.state = "done" if publish else "waiting"


def check_row(model: TreeModel, req: int, request: Running, row: Sequence[int]) -> None:
    """Running request ``req``'s row as the target holds it reads back exactly its tokens'
    KV, position by position, and is the model's (the matched and published positions the
    tree's slots, the rest the ones it was given)."""
    row = [int(s) for s in row]
    model.check_content(request.tokens[:request.computed], request.extra_key, row,
                        f"the row of request {req}")
    if row != request.slots:
        raise Violation(F.CONTENT, f"request {req}'s row holds the tree's slots for its "
                        "protected prefix and its own after it", expected=request.slots,
                        observed=row)
