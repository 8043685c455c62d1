"""Programs as text a person reads: one operation per line, block handles as ``b3``, table
handles as ``t1``, devices by name, and (when known) what each step returned."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

from models.families.v0.capabilities import Config
from models.families.v0.operations import Dev, Op, Outcome

_BLOCK_FIELDS = frozenset({"prev", "block"})
#: Sequences longer than ``LONG_LISTING`` (a long chain's chunks) show their first
#: ``SHOWN_ITEMS`` items and their length; the crash record keeps them whole.
LONG_LISTING = 64
SHOWN_ITEMS = 8


def _value(name: str, value: object) -> str:
    if isinstance(value, Op):  # the call of a malformed-argument operation
        return format_op(value)
    if isinstance(value, Dev):
        return value.value
    if name in _BLOCK_FIELDS and isinstance(value, int):
        return f"b{value}"
    if isinstance(value, tuple) and len(value) > LONG_LISTING:
        head = _value(name, value[:SHOWN_ITEMS])[:-1]
        return f"{head}, ... ({len(value)} in all)]"
    if name == "blocks" and isinstance(value, tuple):
        return "[" + ", ".join(f"b{h}" for h in value) + "]"
    if name == "table" and isinstance(value, int):
        return f"t{value}"
    if isinstance(value, tuple):
        return repr(list(value))
    return repr(value)


def format_op(op: Op) -> str:
    """``kind(field=value, ...)``, omitting fields left at None."""
    parts = [f"{f.name}={_value(f.name, getattr(op, f.name))}" for f in fields(op)
             if getattr(op, f.name) is not None or f.name == "prev"]
    return f"{op.kind}({', '.join(parts)})"


def format_outcome(outcome: Outcome) -> str:
    if outcome.error is not None:
        return f"raised {outcome.error.value}: {outcome.detail}"
    made = []
    new = outcome.new_blocks
    if len(new) > LONG_LISTING:
        made.append(f"-> b{new[0]} .. b{new[-1]} ({len(new)} blocks)")
    elif new:
        made.append("-> " + ", ".join(f"b{h}" for h in new))
    if outcome.new_table is not None:
        made.append(f"-> t{outcome.new_table}")
    if outcome.value is not None:
        made.append(f"= {outcome.value!r}")
    if outcome.cows:
        made.append(f"cows {list(outcome.cows)}")
    return " ".join(made)


def format_program(config: Config, program: Sequence[Op],
                   outcomes: Sequence[Outcome] = ()) -> str:
    """The pool shape, then one numbered line per operation."""
    lines = [f"# block_size={config.block_size} num_gpu_blocks={config.num_gpu_blocks} "
             f"num_cpu_blocks={config.num_cpu_blocks}"]
    for i, op in enumerate(program):
        line = f"{i:3d}  {format_op(op)}"
        if i < len(outcomes):
            shown = format_outcome(outcomes[i])
            if shown:
                line += f"    # {shown}"
        lines.append(line)
    return "\n".join(lines)
