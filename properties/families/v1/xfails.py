"""v1 violations meet the core's expected failures and deviation reports.

The v1 xfails files (``conformance/vllm-*.xfails.json``) are in the core's format
(:mod:`properties.core.plugin`: ``id``, ``family``, ``class``, ``explanation``, ``config``,
``program``, ``match`` with ``ops`` and ``message``); matching is the core's
(:meth:`~properties.core.plugin.ExpectedFailure.matches`, the operation kind is the v1 op's
``kind``). Keys the core ignores and the v1 family reads: ``versions`` (the releases an entry
applies to; absent: all) and ``avoid`` (generator features the machine leaves out, so a run with
a known deviation still explores the rest).

A violation no entry covers leaves a v1 test with its replayable program attached the core's
way (:data:`properties.core.baseline.FOUND_ATTR`: pool config, program, reproducer script), so
``prefixcache check`` reports it like any family's deviation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from models.core.invariants import Violation
from models.families.v1 import ops
from models.families.v1.pool_model import PoolConfig
from properties.core.baseline import FOUND_ATTR, Found, Resolver
from properties.core.plugin import ExpectedFailure, parse_expected
from properties.core.reproducer import render_script
from properties.families.v1.family import FAMILY, Step
from properties.families.v1.reproducer import config_json
from properties.families.v1.stepping import PROGRAM_ATTR
from properties.families.v1.targets import PoolTarget

__all__ = ["applies", "attach", "avoided", "leaves", "matching_entry"]


def applies(raw: Mapping[str, Any], version: str) -> bool:
    """Whether the entry ``raw`` (as written) applies to release ``version``."""
    return version in raw.get("versions", [version])


def avoided(raw_entries: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The generator features the entries ask the machine to leave out."""
    return frozenset(f for e in raw_entries for f in e.get("avoid", ()))


def matching_entry(v: Violation, raw_entries: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The first entry (as written) whose core matching covers ``v``."""
    for raw, entry in zip(raw_entries, parse_expected(raw_entries), strict=True):
        if entry.matches(v):
            return raw
    return None


def first_match(v: Violation, entries: Sequence[ExpectedFailure],
                target: PoolTarget | None = None, config: PoolConfig | None = None
                ) -> ExpectedFailure | None:
    """The first entry covering ``v``; with ``target`` and ``config``, judged with the program
    ``v`` carries (an entry's ``after`` and ``mechanism``, :func:`resolver`)."""
    program = getattr(v, PROGRAM_ATTR, None) if target is not None else None
    resolve = resolver(v, target, config)
    return next((e for e in entries if e.matches(v, program, None, resolve)), None)


def resolver(v: Violation, target: PoolTarget | None,
             config: PoolConfig | None) -> Resolver | None:
    """The mechanism of ``v`` (None without its program, target or config): the kinds of its
    program before the failing step, as Hypothesis shrank it (the core's program shrinking
    follows block handles, which v1 programs do not have)."""
    program = getattr(v, PROGRAM_ATTR, None)
    if target is None or config is None or not program:
        return None
    return Resolver(FAMILY.target_of(target), config, list(program), v, shrink=False)


def leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions of ``exc`` (a group's leaves, or itself)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    else:
        yield exc


def attach(v: Violation, target: PoolTarget, config: PoolConfig) -> None:
    """Attach ``v``'s program (recorded by the step that raised it) with its reproducer."""
    program: list[ops.Op] = list(getattr(v, PROGRAM_ATTR, []))
    if not program:
        return
    script = render_script(FAMILY.target_of(target), config, [Step(op, None) for op in program],
                           v)
    setattr(v, FOUND_ATTR, Found(config_json(config), ops.program_json(program),
                                 target.allocator_type, script, v))
