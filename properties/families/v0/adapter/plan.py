"""Call plans: the statements of one operation, and the expressions they are built from.

A plan's statements are executed by the runner and printed, as they are, by the reproducer:
the helpers here only build :mod:`properties.core.calls` expressions (handles ``b<n>`` and
``t<n>``, literals), so a plan renders the same wherever it is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from models.families.v0.operations import Tokens
from properties.core.calls import Expr, Lit, Name, Stmt

#: The package reproducers import the suite's stand-ins from (``EngineSeq``, ``IdOnlyBlock``,
#: ``swap_by_hand``, ``sequence_extra_hash``: re-exported there), as
#: ``__import__('properties.families.v0.adapter', fromlist=['_']).<name>``.
PACKAGE = __name__.rpartition(".")[0]


@dataclass(slots=True)
class Plan:
    """Statements for one operation, and how to read its value from their results.

    ``creates`` is how many block handles the last statement's result yields (``-1``: as many
    as the returned list holds; ``single``: the result is one block, not a list);
    ``creates_table`` names the table variable it creates.
    """

    stmts: list[Stmt]
    value: Callable[[list[Any]], Any] = field(default=lambda results: None)
    creates: int = 0
    single: bool = False
    creates_table: str | None = None
    admission: Callable[[list[Any]], bool] | None = None


def block(handle: int) -> Name:
    return Name(f"b{handle}")


def table(handle: int) -> Name:
    return Name(f"t{handle}")


def tokens_lit(tokens: Tokens) -> Lit:
    return Lit(list(tokens))


def maybe_block(handle: int | None) -> Expr:
    return Lit(None) if handle is None else block(handle)


def deep_list(value: Any) -> Any:
    return [deep_list(v) for v in value] if isinstance(value, tuple) else value


def bad_literal(bad: Any) -> Lit:
    """``Malformed.bad`` as a call argument: lists as lists, each call getting a fresh
    copy checked for changes; a list that mixes lists and other items is passed unchecked
    (the runner copies only uniform lists)."""
    value = deep_list(bad)
    if isinstance(value, list) and value and isinstance(value[0], list) \
            and not all(isinstance(v, list) for v in value):
        return Lit(tuple(value))
    return Lit(value)
