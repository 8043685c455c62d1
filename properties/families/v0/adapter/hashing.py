"""Content-hash plans: ``HashRecompute`` (the prefix-caching block class's public
``hash_block_tokens``, detected by the core), allocations with int-like tokens, the raw keys
``hash_quality`` reads (``block_keys``), and ``InjectedHash``: the device-aware class built
through its own ``create`` with ``hash_function=models.families.v0.injected_hash.injected_hash``
(an extension: only where ``create`` takes ``hash_function``; vLLM 0.8's does not) (model:
``models/families/v0/ops/hashing.py``).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from models.families.v0 import operations as ops
from models.families.v0.operations import Dev
from properties.core.calls import Attr, Call, Expr, Lit, Name, Stmt, method
from properties.families.v0.adapter.construction import ConstructionPlans
from properties.families.v0.adapter.plan import Plan, block, maybe_block, tokens_lit
from properties.families.v0.adapter.values import Unsupported, checked_int, checked_opt_int


class HashingPlans(ConstructionPlans):
    """Plans of the content-hash operations."""

    def block_keys(self, contents: Sequence[tuple[Sequence[int] | None, Sequence[int]]],
                   ) -> list[int | None]:
        """The ``content_hash`` of each content allocated as a full immutable GPU block (after
        an immutable block of its prefix tokens when that is given), read straight from the
        target (``properties.families.v0.hash_quality``). Every block stays allocated: the pool
        must hold them all. A value that is not an int (or None) is a type violation."""
        gpu = self.device_enum.GPU
        out: list[int | None] = []
        for prev_tokens, tokens in contents:
            prev = None if prev_tokens is None else self.alloc.allocate_immutable_block(
                prev_block=None, token_ids=list(prev_tokens), device=gpu)
            block = self.alloc.allocate_immutable_block(prev_block=prev, token_ids=list(tokens),
                                                        device=gpu)
            out.append(checked_opt_int(block.content_hash, "block.content_hash"))
        return out

    @staticmethod
    def _int_like(value: Expr, helper: str = "int_like") -> Call:
        """``value`` (token ids; a hash with ``helper="int_like_hash"``) as instances of an
        ``int`` subclass (``properties.families.v0.strategies``)."""
        module = Call(Name("__import__"), (Lit("properties.families.v0.strategies"),),
                      (("fromlist", Lit(["_"])),))
        return Call(Attr(module, helper), (value,))

    def _plan_hash_recompute(self, op: ops.HashRecompute, _: Any) -> Plan:
        if not self.has_hash_recompute:
            raise Unsupported("the target's blocks have no hash_block_tokens")
        b = block(op.block)
        prev_hash: Expr = Lit(None) if op.is_first_block \
            else Attr(Attr(b, "prev_block"), "content_hash")
        if op.sentinel:
            if not self.hash_sentinel:
                raise Unsupported("the target's blocks have no _none_hash sentinel")
            prev_hash = Attr(Attr(b, "__class__"), "_none_hash")
        tokens: Expr = Attr(b, "token_ids")
        if op.int_like:
            tokens = self._int_like(tokens)
            if not op.is_first_block and not op.sentinel:
                prev_hash = self._int_like(prev_hash, "int_like_hash")
        kwargs = (("extra_hash", Attr(b, "extra_hash")),) if self.hash_takes_extra else ()
        call = Call(Attr(Attr(b, "__class__"), "hash_block_tokens"),
                    (Lit(op.is_first_block), prev_hash, tokens), kwargs)
        return Plan([Stmt(Attr(b, "content_hash")), Stmt(call)], value=lambda r: [
            checked_opt_int(r[0], "block.content_hash"),
            checked_int(r[1], "PrefixCachingBlock.hash_block_tokens")])

    def _plan_allocate_immutable_int_like(self, op: ops.AllocateImmutableIntLike,
                                          _: Any) -> Plan:
        call = method("alloc", "allocate_immutable_block", maybe_block(op.prev),
                      self._int_like(tokens_lit(op.tokens)), device=self.device(op.device),
                      **self._extra(op.extra_hash))
        return Plan([Stmt(call)], creates=1, single=True)

    @cached_property
    def has_injected_hash(self) -> bool:
        """The device-aware class's ``create`` takes ``hash_function`` (looked up once: the
        block machine's precondition asks every step)."""
        found = self._construct_classes().get("devices")
        if found is None:
            return False
        cls: Any = getattr(sys.modules.get(found[0]), found[1], None)
        try:
            params = inspect.signature(cls.create).parameters
        except (AttributeError, TypeError, ValueError):
            return False
        return "hash_function" in params

    def _plan_injected_hash(self, op: ops.InjectedHash, _: Any) -> Plan:
        if not self.has_injected_hash:
            raise Unsupported("the target's create takes no hash_function")
        injected = Attr(Call(Name("__import__"), (Lit("models.families.v0.injected_hash"),),
                             (("fromlist", Lit(["_"])),)), "injected_hash")
        stmts = [Stmt(Call(Attr(self._construct_cls("devices"), "create"), (
            Lit("prefix_caching"), Lit(4), Lit(4), Lit(self.block_size)),
            (("hash_function", injected),)), bind="hashed", comment="injected hash_function")]
        for dev in Dev:
            d, p = self.device(dev), f"ih_{dev.value}_"
            stmts += [
                Stmt(method("hashed", "allocate_immutable_block", Lit(None), tokens_lit(op.tokens),
                            device=d), bind=p + "x"),
                Stmt(method("hashed", "allocate_immutable_block", Lit(None),
                            tokens_lit(op.permuted), device=d), bind=p + "y"),
                Stmt(method("hashed", "allocate_mutable_block", Lit(None), device=d),
                     bind=p + "z"),
                Stmt(method(p + "z", "append_token_ids", tokens_lit(op.permuted))),
                Stmt(method("hashed", "allocate_immutable_blocks", Lit(None),
                            Lit([list(op.permuted), list(op.tail)]), device=d),
                     unpack=(p + "c0", p + "c1")),
                *(Stmt(Attr(Name(p + n), "content_hash")) for n in ("x", "z", "c1")),
                *(Stmt(Attr(Name(p + n), "block_id")) for n in ("x", "y", "z", "c0")),
            ]
        per_device = 12  # statements per device; the last seven are the read-outs

        def value(r: list[Any]) -> dict[str, list[list[int | None]]]:
            out: dict[str, list[list[int | None]]] = {"hashes": [], "ids": []}
            for k in range(len(Dev)):
                reads = r[1 + k * per_device + 5:1 + (k + 1) * per_device]
                out["hashes"].append([checked_opt_int(h, "block.content_hash")
                                      for h in reads[:3]])
                out["ids"].append([checked_opt_int(i, "block.block_id") for i in reads[3:]])
            return out

        return Plan(stmts, value=value)
