"""Malformed calls: the plan of the wrapped call with one argument replaced by a bad literal
(model: ``models/families/v0/malformed.py``). ``MALFORMED_SLOTS`` says where each validated
field lands in the last call of its plan; a request-key field is an argument of the key
builder's call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from models.families.v0 import operations as ops
from properties.core.calls import Call, Stmt
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.plan import Plan, bad_literal
from properties.families.v0.adapter.values import Unsupported


class MalformedPlans(AdapterCore):
    """Plan of ``Malformed``."""

    #: Where each validated field of an operation lands in the last call of its plan: a
    #: positional index or a keyword (appended when the plan leaves it out).
    MALFORMED_SLOTS: dict[tuple[str, str], int | str] = {
        ("allocate_mutable", "prev"): 0, ("allocate_mutable", "device"): "device",
        ("allocate_mutable", "extra_hash"): "extra_hash",
        ("allocate_immutable", "prev"): 0, ("allocate_immutable", "tokens"): 1,
        ("allocate_immutable", "device"): "device",
        ("allocate_immutable", "extra_hash"): "extra_hash",
        ("allocate_immutable_chain", "prev"): 0, ("allocate_immutable_chain", "chunks"): 1,
        ("allocate_immutable_chain", "device"): "device",
        ("allocate_immutable_chain", "extra_hash"): "extra_hash",
        ("append", "tokens"): 0, ("fork", "block"): 0, ("free", "block"): 0,
        ("swap", "blocks"): 0, ("swap", "src"): 1, ("swap", "dst"): 2,
        ("mark_accessed", "blocks"): 0, ("mark_accessed", "now"): 1,
        ("computed_block_ids", "blocks"): 1,
        ("computed_block_ids", "prev_computed"): 0,  # stale ids
        ("cached_prefix", "blocks"): 0, ("cached_prefix", "device"): "device",
        ("count_touched", "blocks"): 0, ("count_touched", "device"): 1,
        ("count_touched", "lookahead"): 2,
        ("count_full_touched", "blocks"): 0, ("count_full_touched", "device"): 1,
        ("hit_rate", "device"): 0, ("reset_prefix_cache", "device"): 0,
        ("table_allocate", "tokens"): 0, ("table_allocate", "device"): "device",
        ("table_allocate", "extra_hash"): "extra_hash",
        ("table_append", "tokens"): 0, ("table_append", "lookahead"): "num_lookahead_slots",
        ("table_ensure_slots", "slots"): 0, ("table_mark_accessed", "now"): 1,
        ("table_append", "extra_hash"): "extra_hash",  # the table's extra_hash
        ("table_ensure_slots", "extra_hash"): "extra_hash",
        # content hash: the parameters of ``hash_block_tokens``
        ("hash_recompute", "is_first_block"): 0, ("hash_recompute", "prev_block_hash"): 1,
        ("hash_recompute", "token_ids"): 2,
    }

    def _plan_malformed(self, op: ops.Malformed, tables: Mapping[int, Any]) -> Plan:
        """The plan of ``op.call`` with the argument's expression in its last call replaced
        by the literal ``op.bad`` (commented, so a reproducer shows which argument is bad)."""
        plan = self.plan(op.call, tables)
        last = plan.stmts[-1]
        call = last.expr
        # request keys: ``extra_hash.<field>`` is an argument of the key builder's call
        outer, dot, key_field = op.argument.partition(".")
        if dot:
            if outer != "extra_hash" or self.extra_key_function is None \
                    or not isinstance(call, Call):
                raise Unsupported(f"{op.call.kind}: no key builder call to malform")
            kwargs = dict(call.kwargs)
            builder = kwargs.get("extra_hash")
            if not isinstance(builder, Call):
                raise Unsupported(f"{op.call.kind} renders no request key")
            bad_kwargs = {**dict(builder.kwargs), key_field: bad_literal(op.bad)}
            kwargs["extra_hash"] = Call(builder.func, builder.args, tuple(bad_kwargs.items()))
            plan.stmts[-1] = Stmt(Call(call.func, call.args, tuple(kwargs.items())),
                                  bind=last.bind, unpack=last.unpack,
                                  comment=f"malformed {op.argument}")
            return plan
        # end request keys
        slot = self.MALFORMED_SLOTS.get((op.call.kind, op.argument))
        if slot is None or not isinstance(call, Call) or (
                isinstance(slot, int) and slot > len(call.args)):
            raise Unsupported(f"{op.call.kind} has no argument {op.argument!r} to malform")
        bad = bad_literal(op.bad)
        if isinstance(slot, int):
            args = [*call.args[:slot], bad, *call.args[slot + 1:]]
            call = Call(call.func, tuple(args), call.kwargs)
        else:
            kwargs = {**dict(call.kwargs), slot: bad}
            call = Call(call.func, call.args, tuple(kwargs.items()))
        plan.stmts[-1] = Stmt(call, bind=last.bind, unpack=last.unpack,
                              comment=f"malformed {op.argument}")
        return plan
