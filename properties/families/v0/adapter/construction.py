"""Construction plans: ``Construct`` builds the target's own classes beside its allocator:
the GPU allocator's class (prefix-caching or naive), the naive class a prefix-caching one
embeds (``_hashless_allocator``, docs/API.md §4) or the prefix-caching class of the package, the
``NaiveBlock`` of the naive class's module, and the allocator's device-aware class (for
``devices`` and ``create``). A class that is not importable by name is not found (a reproducer
could not build it); the machines and the decoder ask only for what ``construct_support``
lists. The built allocator is bound to ``built``
(model: ``models/families/v0/ops/construction.py``).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from functools import cached_property
from typing import Any

from models.families.v0 import operations as ops
from models.families.v0.operations import Dev
from properties.core.calls import Attr, Call, Expr, Lit, Name, Stmt, method
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan, bad_literal
from properties.families.v0.adapter.values import (
    Unsupported,
    checked_block,
    checked_id_set,
    checked_int,
)


class ConstructionPlans(AdapterCore):
    """Plans of ``Construct``, and the classes it finds."""

    def construct_support(self) -> frozenset[str]:
        """What ``Construct`` can build: ``"naive"``, ``"prefix_caching"``, ``"devices"`` (the
        device-aware class), ``"hash_function"`` (the prefix-caching class takes one)."""
        return self._construct_support

    @cached_property
    def _construct_support(self) -> frozenset[str]:
        """Found once: the block machine's precondition asks every step."""
        return frozenset(name for name in self._construct_classes() if name != "naive_block")

    @property
    def has_construct(self) -> bool:
        """Every class ``Construct`` needs but the hash-function extension (the decoder's
        feature: it never malforms ``hash_function``)."""
        return {"naive", "prefix_caching", "devices"} <= self.construct_support()

    def _construct_classes(self) -> dict[str, tuple[str, str]]:
        if "_construct_in" not in self.__dict__:
            self._construct_in = self._find_construct_classes()
        return self._construct_in

    def _find_construct_classes(self) -> dict[str, tuple[str, str]]:
        gpu = self._gpu_allocator()
        if gpu is None:
            return {}
        caching = getattr(gpu, "evictor", None) is not None
        found: dict[str, Any] = {"devices": type(self.alloc)}
        naive = getattr(gpu, "_hashless_allocator", None) if caching else gpu
        if naive is not None:
            found["naive"] = type(naive)
            found["naive_block"] = getattr(sys.modules.get(type(naive).__module__, None),
                                           "NaiveBlock", None)
        if caching:
            found["prefix_caching"] = type(gpu)
        else:
            package = type(self.alloc).__module__.rsplit(".", 1)[0]
            try:
                module = importlib.import_module(f"{package}.prefix_caching_block")
            except ImportError:
                module = None
            found["prefix_caching"] = getattr(module, "PrefixCachingBlockAllocator", None)
        out: dict[str, tuple[str, str]] = {}
        for name, cls in found.items():
            module_name, attr = getattr(cls, "__module__", ""), getattr(cls, "__name__", "")
            if isinstance(cls, type) and getattr(sys.modules.get(module_name), attr, None) is cls:
                out[name] = (module_name, attr)
        if "naive_block" not in out:
            out.pop("naive", None)
        if not callable(getattr(found["devices"], "create", None)):
            out.pop("devices", None)
        if "prefix_caching" in out and "hash_function" in inspect.signature(
                found["prefix_caching"]).parameters:
            out["hash_function"] = out["prefix_caching"]
        return out

    def _construct_cls(self, name: str) -> Attr:
        found = self._construct_classes().get(name)
        if found is None:
            raise Unsupported(f"the target has no {name} class to construct")
        module_name, attr = found
        module = Call(Name("__import__"), (Lit(module_name),), (("fromlist", Lit(["_"])),))
        return Attr(module, attr)

    def _construct_one(self, op: ops.Construct, ids: tuple[int, ...], bind: str,
                       replaced: str) -> Stmt:
        """``bind = <allocator>(...)`` over ``ids``, its argument ``replaced`` (if any) being
        ``op.bad``."""
        bad = bad_literal(op.bad)
        n: Expr = bad if replaced == "num_blocks" else Lit(len(ids))
        size: Expr = bad if replaced == "block_size" else Lit(self.block_size)
        kwargs: list[tuple[str, Expr]] = [
            ("block_ids", bad if replaced == "block_ids" else Lit(list(ids)))]
        if not op.argument and ids == tuple(range(len(ids))):  # default ids
            kwargs = []  # docs/API.md §4: block_ids defaults to range(num_blocks)
        args: tuple[Expr, ...]
        if op.allocator == "naive":
            func, args = self._construct_cls("naive"), (self._construct_cls("naive_block"), n,
                                                        size)
        else:
            func, args = self._construct_cls("prefix_caching"), (n, size)
            if replaced == "hash_function":
                self._construct_cls(replaced)  # an extension: only where it is detected
            if replaced in ("eviction_policy", "hash_function"):
                kwargs.append((replaced, bad))
        return Stmt(Call(func, args, tuple(kwargs)), bind=bind,
                    comment=f"malformed {replaced}" if replaced else "")

    def _plan_construct(self, op: ops.Construct, _: Any) -> Plan:
        if op.argument == "allocator_type":
            call = Call(Attr(self._construct_cls("devices"), "create"), (
                bad_literal(op.bad), Lit(len(op.ids)), Lit(len(op.cpu_ids)),
                Lit(self.block_size)))
            return Plan([Stmt(call, bind="built", comment="malformed allocator_type")])
        own = "" if op.argument.startswith("cpu_") else op.argument
        if op.create:  # the device-aware class's own factory numbers the ids
            stmts = [Stmt(Call(Attr(self._construct_cls("devices"), "create"), (
                Lit(op.allocator), Lit(len(op.ids)), Lit(len(op.cpu_ids)),
                Lit(self.block_size))), bind="built")]
            devs: list[tuple[Dev | None, tuple[int, ...]]] = [(Dev.GPU, op.ids),
                                                              (Dev.CPU, op.cpu_ids)]
        elif not op.devices:
            stmts = [self._construct_one(op, op.ids, "built", own)]
            devs = [(None, op.ids)]
        else:
            cpu_ids = "block_ids" if op.argument == "cpu_block_ids" else ""
            cpu = "built_gpu" if op.argument == "cpu_block_allocator" else "built_cpu"
            stmts = [self._construct_one(op, op.ids, "built_gpu", own),
                     self._construct_one(op, op.cpu_ids, "built_cpu", cpu_ids),
                     Stmt(Call(self._construct_cls("devices"), (), (
                         ("cpu_block_allocator", Name(cpu)),
                         ("gpu_block_allocator", Name("built_gpu")))), bind="built",
                         comment="the GPU allocator twice" if cpu == "built_gpu" else "")]
            devs = [(Dev.GPU, op.ids), (Dev.CPU, op.cpu_ids)]
        if op.argument:
            return Plan(stmts)  # only the constructors: they must refuse it
        reads: list[tuple[str, Stmt]] = []
        on = [(self.device(d),) if d is not None else () for d, _ in devs]
        reads += [("total", Stmt(method("built", "get_num_total_blocks", *d))) for d in on]
        reads += [("free", Stmt(method("built", "get_num_free_blocks", *d))) for d in on]
        reads.append(("all", Stmt(Attr(Name("built"), "all_block_ids"))))
        for d, (_, ids) in zip(on, devs, strict=True):
            reads += [("physical", Stmt(method("built", "get_physical_block_id", *d, Lit(i))))
                      for i in ids]
        for d, (_, ids) in zip(on, devs, strict=True):
            kw = {"device": d[0]} if d else {}
            handed = Stmt(method("built", "allocate_mutable_block", Lit(None), **kw))
            reads += [("handed", handed)] * len(ids)  # one immutable statement, repeated
        reads += [("free_after", Stmt(method("built", "get_num_free_blocks", *d))) for d in on]
        start, keys = len(stmts), [key for key, _ in reads]

        def value(r: list[Any]) -> dict[str, list[int]]:
            out: dict[str, list[int]] = {key: [] for key in (
                "total", "free", "all", "physical", "handed", "free_after")}
            for key, got in zip(keys, r[start:], strict=True):
                if key == "all":
                    out[key] = sorted(checked_id_set(got, "built.all_block_ids"))
                elif key == "handed":
                    out[key].append(checked_int(checked_block(
                        got, "built.allocate_mutable_block").block_id, "block.block_id"))
                else:
                    out[key].append(checked_int(got, f"built ({key})"))
            return out

        return Plan([*stmts, *(stmt for _, stmt in reads)], value=value)
