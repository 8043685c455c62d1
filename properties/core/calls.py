"""Call plans: one description of what an operation does to a target, both executed by the
runner and rendered as Python by the reproducer, so a printed counterexample replays exactly
the calls that failed.

A plan is a list of :class:`Stmt`; expressions are a tiny tree (names, attributes, literals,
lists, calls). ``eval_expr`` runs them against an environment of live objects; ``render``
prints them as source.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import field
from typing import Any, TypeAlias

from models.core.records import record


@record
class Name:
    """A variable: ``alloc``, ``Device``, ``BlockTable``, ``b3`` (block handle 3), ``t1``."""

    id: str


@record
class Attr:
    obj: Expr
    name: str


@record
class Lit:
    """A literal: int, float, bool, None, str, or a list/tuple of those."""

    value: Any


@record
class ListOf:
    items: tuple[Expr, ...]


@record
class Call:
    func: Expr
    args: tuple[Expr, ...] = ()
    kwargs: tuple[tuple[str, Expr], ...] = ()


Expr: TypeAlias = Name | Attr | Lit | ListOf | Call


@record
class Stmt:
    """Evaluate ``expr``; bind the result to ``bind`` (or unpack it into ``unpack`` names)."""

    expr: Expr
    bind: str | None = None
    unpack: tuple[str, ...] = field(default=())
    comment: str = ""


def method(obj: Expr | str, name: str, *args: Expr, **kwargs: Expr) -> Call:
    """``obj.name(*args, **kwargs)``; keyword order is kept for rendering."""
    target = Name(obj) if isinstance(obj, str) else obj
    return Call(Attr(target, name), tuple(args), tuple(kwargs.items()))


def eval_expr(expr: Expr, env: Mapping[str, Any]) -> Any:
    """Evaluate ``expr`` with names from ``env`` (a missing name is a ``KeyError``)."""
    # Exact types, most frequent first: cheaper than a chain of isinstance calls.
    if type(expr) is Name:
        return env[expr.id]
    if type(expr) is Attr:
        obj = expr.obj  # most often a name (``alloc.method``): no recursive call for it
        return getattr(env[obj.id] if type(obj) is Name else eval_expr(obj, env), expr.name)
    if type(expr) is Call:
        func = eval_expr(expr.func, env)
        args = [eval_expr(a, env) for a in expr.args]
        if not expr.kwargs:
            return func(*args)
        return func(*args, **{k: eval_expr(v, env) for k, v in expr.kwargs})
    if type(expr) is Lit:
        return list(expr.value) if isinstance(expr.value, tuple) else expr.value
    if type(expr) is ListOf:
        return [eval_expr(item, env) for item in expr.items]
    raise TypeError(f"not an expression: {expr!r}")


def run(stmt: Stmt, env: MutableMapping[str, Any]) -> Any:
    """Execute one statement, updating ``env`` with what it binds; returns the result."""
    result = eval_expr(stmt.expr, env)
    if stmt.bind is not None:
        env[stmt.bind] = result
    if stmt.unpack:
        items = list(result)
        if len(items) != len(stmt.unpack):
            raise ValueError(f"expected {len(stmt.unpack)} results, got {len(items)}")
        env.update(zip(stmt.unpack, items, strict=True))
    return result


def render_expr(expr: Expr) -> str:
    if isinstance(expr, Name):
        return expr.id
    if isinstance(expr, Attr):
        return f"{render_expr(expr.obj)}.{expr.name}"
    if isinstance(expr, Lit):
        value = list(expr.value) if isinstance(expr.value, tuple) else expr.value
        return repr(value)
    if isinstance(expr, ListOf):
        return "[" + ", ".join(render_expr(i) for i in expr.items) + "]"
    parts = [render_expr(a) for a in expr.args]
    parts += [f"{k}={render_expr(v)}" for k, v in expr.kwargs]
    return f"{render_expr(expr.func)}({', '.join(parts)})"


def render(stmt: Stmt) -> str:
    """One line of Python for ``stmt``."""
    code = render_expr(stmt.expr)
    if stmt.unpack:
        names = ", ".join(stmt.unpack)
        code = f"{names}{',' if len(stmt.unpack) == 1 else ''} = {code}"
    elif stmt.bind is not None:
        code = f"{stmt.bind} = {code}"
    return f"{code}  # {stmt.comment}" if stmt.comment else code
