"""Evictor-level plans: ``EVICTOR_OPS`` drive a fresh instance of the evictor class the GPU
prefix-caching allocator uses (a detected capability: none without one), named ``evictor`` in
the plans. The first evictor operation of a program builds it: ``make_evictor(EvictionPolicy.LRU)``
of that class's module when it yields that class, else the class called with no arguments
(model: ``models/families/v0/evictor_model.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Attr, Call, Lit, Name, Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan
from properties.families.v0.adapter.values import (
    Unsupported,
    checked_bool,
    checked_int,
    checked_number,
    is_int,
    wrong_type,
)


class EvictorPlans(AdapterCore):
    """Plans of the evictor operations, and the evictor's state read back."""

    def evictor_factory(self) -> tuple[str, str] | None:
        """(module, ``"make_evictor"`` or the class name) of the target's evictor, or None."""
        if "_evictor_in" not in self.__dict__:
            self._evictor_in = self._find_evictor_factory()
            self._evictor_made = False
        return self._evictor_in

    @property
    def has_evictor(self) -> bool:
        return self.evictor_factory() is not None

    def _find_evictor_factory(self) -> tuple[str, str] | None:
        evictor = getattr(self._gpu_allocator(), "evictor", None)
        if evictor is None:
            return None
        cls = type(evictor)
        module = sys.modules.get(cls.__module__)
        make = getattr(module, "make_evictor", None)
        policy = getattr(getattr(module, "EvictionPolicy", None), "LRU", None)
        if callable(make) and policy is not None and type(make(policy)) is cls:
            return cls.__module__, "make_evictor"
        if getattr(module, cls.__name__, None) is not cls:
            return None  # not importable by name: a reproducer could not build it
        return cls.__module__, cls.__name__

    def _evictor(self) -> list[Stmt]:
        """The statement building ``evictor``, for the program's first evictor operation."""
        found = self.evictor_factory()
        if found is None:
            raise Unsupported("the target's GPU allocator has no evictor")
        if self._evictor_made:
            return []
        self._evictor_made = True
        module_name, name = found
        module = Call(Name("__import__"), (Lit(module_name),), (("fromlist", Lit(["_"])),))
        args = (Attr(Attr(module, "EvictionPolicy"), "LRU"),) if name == "make_evictor" else ()
        return [Stmt(Call(Attr(module, name), args), bind="evictor")]

    def _plan_evictor_add(self, op: ops.EvictorAdd, _: Any) -> Plan:
        call = method("evictor", "add", Lit(op.block_id), Lit(op.content_hash),
                      Lit(op.num_hashed_tokens), Lit(op.last_accessed))
        return Plan([*self._evictor(), Stmt(call)])

    def _plan_evictor_update(self, op: ops.EvictorUpdate, _: Any) -> Plan:
        call = method("evictor", "update", Lit(op.block_id), Lit(op.last_accessed))
        return Plan([*self._evictor(), Stmt(call)])

    def _plan_evictor_remove(self, op: ops.EvictorRemove, _: Any) -> Plan:
        return Plan([*self._evictor(), Stmt(method("evictor", "remove", Lit(op.block_id)))])

    def _plan_evictor_evict(self, op: ops.EvictorEvict, _: Any) -> Plan:
        def value(r: list[Any]) -> list[int]:
            got = r[-1]
            if not isinstance(got, tuple | list) or len(got) != 2 or not all(map(is_int, got)):
                raise wrong_type("evictor.evict", "(int, int)", got)
            return [int(got[0]), int(got[1])]

        return Plan([*self._evictor(), Stmt(method("evictor", "evict"))], value=value)

    def _plan_evictor_contains(self, op: ops.EvictorContains, _: Any) -> Plan:
        made = self._evictor()
        stmts = [*made, *(Stmt(method("evictor", "__contains__", Lit(i))) for i in op.ids)]
        return Plan(stmts, value=lambda r: [
            checked_bool(x, "evictor.__contains__") for x in r[len(made):]])

    def evictor_state(self, evictor: Any) -> ops.EvictorState:
        """``num_blocks`` and ``free_table`` of ``evictor``, type-checked."""
        count = checked_int(evictor.num_blocks, "evictor.num_blocks")
        table = evictor.free_table
        if not isinstance(table, Mapping):
            raise wrong_type("evictor.free_table", "dict of int -> BlockMetaData", table)
        shown_table: dict[int, tuple[int, int, float]] = {}
        for block_id, meta in table.items():
            what = f"evictor.free_table[{block_id!r}]"
            shown_table[checked_int(block_id, "evictor.free_table (a key)")] = (
                checked_int(meta.content_hash, f"{what}.content_hash"),
                checked_int(meta.num_hashed_tokens, f"{what}.num_hashed_tokens"),
                checked_number(meta.last_accessed, f"{what}.last_accessed"))
        return ops.EvictorState(count, shown_table)
