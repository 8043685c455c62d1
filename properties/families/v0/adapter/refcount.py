"""Refcount-level plans: ``REFCOUNT_OPS`` drive fresh instances of the classes of the GPU
allocator's ``_refcounter`` (a full counter: it has ``as_readonly``) and ``_cow_tracker`` (a
detected capability: none without both, or when a class is not importable by name). ``RefNew``
binds ``refcounter``, ``refcount_view`` (``as_readonly()``) and ``cow_tracker`` (over the view,
as the allocators build theirs); the snapshot reads ``get`` of the ids it named (model:
``models/families/v0/refcount_model.py``).
"""

from __future__ import annotations

import sys
from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Attr, Call, Lit, Name, Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import PACKAGE, Plan
from properties.families.v0.adapter.values import (
    Unsupported,
    checked_bool,
    checked_int,
    checked_opt_int,
    checked_pairs,
    wrong_type,
)


class RefcountPlans(AdapterCore):
    """Plans of the refcount operations, and the counter's state read back."""

    def refcount_classes(self) -> tuple[tuple[str, str], tuple[str, str]] | None:
        """(module, class name) of the target's counter and of its CoW tracker, or None."""
        if "_refcount_in" not in self.__dict__:
            self._refcount_in = self._find_refcount_classes()
            self.refcount_ids: tuple[int, ...] = ()
        return self._refcount_in

    @property
    def has_refcount(self) -> bool:
        return self.refcount_classes() is not None

    def _find_refcount_classes(self) -> tuple[tuple[str, str], tuple[str, str]] | None:
        gpu = self._gpu_allocator()
        counter = getattr(gpu, "_refcounter", None)
        tracker = getattr(gpu, "_cow_tracker", None)
        needs = ((counter, ("incr", "decr", "get", "as_readonly")),
                 (tracker, ("is_appendable", "record_cow", "clear_cows")))
        found: list[tuple[str, str]] = []
        for obj, names in needs:
            cls = type(obj)
            if obj is None or not all(callable(getattr(obj, n, None)) for n in names) \
                    or getattr(sys.modules.get(cls.__module__), cls.__name__, None) is not cls:
                return None  # missing, or not importable by name (a reproducer could not build it)
            found.append((cls.__module__, cls.__name__))
        return found[0], found[1]

    def _refcount_classes(self) -> tuple[tuple[str, str], tuple[str, str]]:
        found = self.refcount_classes()
        if found is None:
            raise Unsupported("the target's GPU allocator has no RefCounter/CopyOnWriteTracker")
        return found

    @staticmethod
    def _class_expr(module_name: str, name: str) -> Attr:
        module = Call(Name("__import__"), (Lit(module_name),), (("fromlist", Lit(["_"])),))
        return Attr(module, name)

    def _plan_ref_new(self, op: ops.RefNew, _: Any) -> Plan:
        (counter_mod, counter_cls), (cow_mod, cow_cls) = self._refcount_classes()
        self.refcount_ids = tuple(sorted(set(op.ids)))
        return Plan([
            Stmt(Call(self._class_expr(counter_mod, counter_cls), (Lit(list(op.ids)),)),
                 bind="refcounter"),
            Stmt(method("refcounter", "as_readonly"), bind="refcount_view"),
            Stmt(Call(self._class_expr(cow_mod, cow_cls), (Name("refcount_view"),)),
                 bind="cow_tracker")])

    def _plan_counter(self, name: str, op: ops.RefIncr | ops.RefDecr | ops.RefGet) -> Plan:
        self._refcount_classes()
        obj = "refcount_view" if op.readonly else "refcounter"
        return Plan([Stmt(method(obj, name, Lit(op.block_id)))],
                    value=lambda r: checked_int(r[-1], f"{obj}.{name}"))

    def _plan_ref_incr(self, op: ops.RefIncr, _: Any) -> Plan:
        return self._plan_counter("incr", op)

    def _plan_ref_decr(self, op: ops.RefDecr, _: Any) -> Plan:
        return self._plan_counter("decr", op)

    def _plan_ref_get(self, op: ops.RefGet, _: Any) -> Plan:
        return self._plan_counter("get", op)

    def _plan_cow_appendable(self, op: ops.CowAppendable, _: Any) -> Plan:
        self._refcount_classes()
        stand_in = Call(self._class_expr(PACKAGE, "IdOnlyBlock"), (Lit(op.block_id),))
        return Plan([Stmt(method("cow_tracker", "is_appendable", stand_in))],
                    value=lambda r: checked_bool(r[-1], "cow_tracker.is_appendable"))

    def _plan_cow_record(self, op: ops.CowRecord, _: Any) -> Plan:
        self._refcount_classes()
        return Plan([Stmt(method("cow_tracker", "record_cow", Lit(op.src_id),
                                 Lit(op.dst_id)))])

    def _plan_cow_clear(self, op: ops.CowClear, _: Any) -> Plan:
        self._refcount_classes()
        return Plan([Stmt(method("cow_tracker", "clear_cows"))],
                    value=lambda r: checked_pairs(r[-1], "cow_tracker.clear_cows"))

    def refcount_state(self, counter: Any, tracker: Any) -> ops.RefcountState:
        """``get`` of every id ``RefNew`` named, and the tracker's ``pending()`` where it has
        one; type-checked."""
        self.refcount_classes()
        counts = {i: checked_int(counter.get(i), f"refcounter.get({i})")
                  for i in self.refcount_ids}
        pending = None
        if callable(getattr(tracker, "pending", None)):  # an extension: not every tracker has it
            pairs = tracker.pending()
            if type(pairs) is not list or not all(
                    isinstance(p, tuple | list) and len(p) == 2 for p in pairs):
                raise wrong_type("cow_tracker.pending", "list of pairs", pairs)
            # A ``None`` id is shown as recorded (the model judges it), not as a wrong type.
            pending = tuple((checked_opt_int(p[0], "cow_tracker.pending"),
                             checked_opt_int(p[1], "cow_tracker.pending")) for p in pairs)
        return ops.RefcountState(counts, pending)


class IdOnlyBlock:
    """The least of a block ``CopyOnWriteTracker.is_appendable`` reads: ``block_id``
    (refcount level)."""

    def __init__(self, block_id: int | None) -> None:
        self.block_id = block_id

    def __repr__(self) -> str:
        return f"IdOnlyBlock({self.block_id!r})"
