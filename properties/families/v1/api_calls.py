"""Public API coverage of a v1 pool: how often the pool machine's generated programs call each
public method of the pool class.

The pool class is replaced by a counting subclass (every public callable of ``dir(cls)``, the
names without a leading underscore, wrapped), and the pool machine
(:func:`properties.families.v1.machine.bind`) runs against it as ``prefixcache check`` runs it:
the default configuration fitting the target, under a Hypothesis profile (default ``ci``,
derandomized), without the shrink phase (shrinking replays a failing example; its calls are not
generated programs). Each call from outside the pool is attributed to the suite code that made
it, found on the stack:

* ``program``: an operation of a generated program (:meth:`Executor._apply`);
* ``misuse``: a misuse probe the program asked for, on a copy of the pool
  (:meth:`Executor.probe`);
* ``observe``: the judge reading the pool's state after a step (:meth:`Executor.check`, the
  snapshots of :class:`PoolAdapter`), which no program asks for;

and a public method the pool calls on itself, inside one of those calls, is ``internal`` (an
engine-facing helper the pool's own operations use, e.g. 0.34's ``generate_event_extra_keys``).

A method is *never called* when no generated program called it (``program`` and ``misuse``
zero), whatever the judge read. Options are counted too: each keyword argument a generated
program passed (the adapter passes an option only when it is set, e.g.
``cache_partial_block(replace_existing_hashes=True)``, ``free_blocks(evict_first=True)``,
``cache_full_blocks(block_mask=...)``) is a row ``method(keyword)``, and each pool configuration
the machines built (``PoolConfig``: group block sizes, hash lookahead, events, caching) is
counted once per machine. A run that meets a deviation stops there (its counts so far are
reported, with the deviation); give ``--xfails-file`` to run as ``prefixcache check`` does:
leaving out the generator features its entries ``avoid``, and ending an example quietly at a
violation one of its entries matches (by family, operation, message, ``after`` and tokens; its
``match.mechanism`` is not computed here, so an entry absorbs a little more than in the check),
counted per entry.

CLI::

    python -m properties.families.v1.api_calls                   # the bundled pool
    python -m properties.families.v1.api_calls \\
        --allocator properties.upstream:vllm_v033_block_pool \\
        --xfails-file conformance/vllm-0.33.xfails.json
"""

from __future__ import annotations

import argparse
import functools
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import Any

from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from models.families.v1.pool_model import PoolConfig
from properties.core import profiles  # noqa: F401  (registers the suite's profiles)
from properties.core.determinism import fixed_constants
from properties.core.plugin import ExpectedFailure, load_expected
from properties.families.v1 import targets
from properties.families.v1.adapter import PoolAdapter
from properties.families.v1.executor import Executor
from properties.families.v1.family import FAMILY
from properties.families.v1.machine import bind, checked_avoid
from properties.families.v1.targets import PoolTarget

__all__ = ["CALLERS", "Counts", "census_settings", "config_label", "count_calls", "counting",
           "counting_class", "main", "public_methods", "table"]

CALLERS = ("program", "misuse", "observe", "internal")

# Innermost suite frame -> who made the call. ``snapshot`` and ``free_queue`` are observation
# even inside a probe or an operation (the before/after states of a failed call).
_FRAMES: dict[Any, str] = {
    Executor._apply.__code__: "program",
    Executor.probe.__code__: "misuse",
    Executor.check.__code__: "observe",
    PoolAdapter.snapshot.__code__: "observe",
    PoolAdapter.free_queue.__code__: "observe",
}


def public_methods(cls: type, properties: bool = False) -> list[str]:
    """The public callables of ``cls`` (``dir`` without names starting with ``_``; plain
    attributes such as a module a class holds are not methods), and with ``properties`` its
    public properties (read like a method: the manager's ``usage``)."""
    out = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(raw) or (
                properties and isinstance(raw, property)):
            out.append(name)
    return out


@dataclass
class Counts:
    """Calls per public method and caller (:data:`CALLERS`); ``stopped``: the deviation that
    ended the run, if one did."""

    methods: list[str]
    calls: dict[str, dict[str, int]] = field(default_factory=dict)
    examples: int = 0
    stopped: str = ""
    #: generated calls per ``method(keyword)``: the keyword options programs passed
    options: dict[str, int] = field(default_factory=dict)
    #: machines per pool configuration (:func:`config_label`)
    configs: dict[str, int] = field(default_factory=dict)
    #: examples ended by each xfails entry (``count_calls``'s ``entries``)
    absorbed: dict[str, int] = field(default_factory=dict)

    def add(self, method: str, caller: str) -> None:
        row = self.calls.setdefault(method, dict.fromkeys(CALLERS, 0))
        row[caller] += 1

    def by(self, method: str, caller: str) -> int:
        return self.calls.get(method, {}).get(caller, 0)

    def generated(self, method: str) -> int:
        """Calls of ``method`` by generated programs (operations and misuse probes)."""
        return self.by(method, "program") + self.by(method, "misuse")

    def never_called(self) -> list[str]:
        return [m for m in self.methods if not self.generated(m)]


_LOCAL = threading.local()


def _caller(frames: dict[Any, str]) -> str:
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        found = frames.get(frame.f_code)
        if found is not None:
            return found
        frame = frame.f_back
    return "observe"  # the machine's own bookkeeping (no program operation)


def _wrap(name: str, fn: Callable[..., Any], counts: Counts, frames: dict[Any, str]
          ) -> Callable[..., Any]:
    @functools.wraps(fn)
    def counted(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_LOCAL, "depth", 0)
        caller = _caller(frames) if depth == 0 else "internal"
        counts.add(name, caller)
        if caller in ("program", "misuse"):
            for keyword in kwargs:
                option = f"{name}({keyword})"
                counts.options[option] = counts.options.get(option, 0) + 1
        _LOCAL.depth = depth + 1
        try:
            return fn(*args, **kwargs)
        finally:
            _LOCAL.depth = depth

    return counted


def counting_class(cls: type, counts: Counts, frames: dict[Any, str]) -> type:
    """A subclass of ``cls`` counting the calls of ``counts.methods`` (a property counts its
    reads) into ``counts``, each attributed by the innermost suite frame of ``frames`` (code
    object -> caller) on the stack (none: ``observe``), or ``internal`` inside another counted
    call."""
    attrs: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
    for name in counts.methods:
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, staticmethod):
            attrs[name] = staticmethod(_wrap(name, raw.__func__, counts, frames))
        elif isinstance(raw, classmethod):
            attrs[name] = classmethod(_wrap(name, raw.__func__, counts, frames))
        elif isinstance(raw, property) and raw.fget is not None:
            attrs[name] = property(_wrap(name, raw.fget, counts, frames), raw.fset, raw.fdel)
        else:
            attrs[name] = _wrap(name, raw, counts, frames)
    return type(cls.__name__, (cls,), attrs)


def absorb(machine: Any, entries: Sequence[ExpectedFailure], counts: Counts) -> None:
    """Patch ``machine.do`` (the class's): a violation an xfails entry matches ends that
    example's calls quietly (counted in ``counts.absorbed`` by entry id), as the check's own
    absorption does; any other violation is raised."""
    do = machine.do

    def absorbing_do(self: Any, op: Any) -> None:
        if self.absorbed:
            return
        try:
            do(self, op)
        except Violation as violation:
            history = [step.op for step in self.judge.log]
            entry = next((e for e in entries if e.matches(
                violation, history, self.target.allocator_type)), None)
            if entry is None:
                raise
            counts.absorbed[entry.id] = counts.absorbed.get(entry.id, 0) + 1
            self.absorbed = True

    machine.do = absorbing_do


def counting(pool: PoolTarget, counts: Counts | None = None) -> tuple[PoolTarget, Counts]:
    """``pool`` with its class replaced by a subclass counting the public methods' calls."""
    cls = pool.pool_cls
    counts = Counts(public_methods(cls)) if counts is None else counts
    return replace(pool, pool_cls=counting_class(cls, counts, _FRAMES)), counts


def census_settings(profile: str, max_examples: int | None = None,
                    max_steps: int | None = None) -> settings:
    """``profile`` as a census runs it: no shrinking or explaining (a count, not a verdict),
    optionally with fewer examples or steps."""
    base = settings.get_profile(profile)
    overrides: dict[str, Any] = {
        "phases": [p for p in base.phases if p not in (Phase.shrink, Phase.explain)]}
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    if max_steps is not None:
        overrides["stateful_step_count"] = max_steps
    return settings(base, **overrides)


def count_calls(pool: PoolTarget, profile: str = "ci", max_examples: int | None = None,
                max_steps: int | None = None, avoid: Iterable[str] = (),
                entries: Sequence[ExpectedFailure] = ()) -> Counts:
    """Run the pool machine over ``pool`` (counted) under ``profile`` (optionally with fewer
    examples or steps), leaving out ``avoid`` and ending an example at a violation one of
    ``entries`` matches; the calls its programs made."""
    counted, counts = counting(pool)
    run_settings = census_settings(profile, max_examples, max_steps)
    machine = bind(counted, avoid=checked_avoid(avoid), name="ApiCallsMachine")
    examples = 0
    init = machine.__init__

    def counted_init(self: Any) -> None:
        nonlocal examples
        examples += 1
        init(self)

    machine.__init__ = counted_init  # type: ignore[method-assign]
    setup = machine.setup

    def counted_setup(self: Any, config: PoolConfig) -> None:
        label = config_label(config)
        counts.configs[label] = counts.configs.get(label, 0) + 1
        setup(self, config)

    machine.setup = counted_setup  # type: ignore[method-assign]
    if entries:
        absorb(machine, entries, counts)
    try:
        with fixed_constants():
            run_state_machine_as_test(machine, settings=run_settings)
    except Violation as v:
        counts.stopped = str(v).splitlines()[0]
    counts.examples = examples
    return counts


def config_label(config: PoolConfig) -> str:
    """What a machine's pool configuration varies in, as one label."""
    return (f"groups {'/'.join(map(str, config.group_block_sizes))}, "
            f"lookahead {config.lookahead}, events {'on' if config.events else 'off'}, "
            f"caching {'on' if config.caching else 'off'}")


def table(counts: Counts, title: str) -> str:
    """The counts as a text table, one row per public method, most called first; the methods no
    generated program called are marked and listed at the end."""
    width = max([len(m) for m in counts.methods] + [6])
    lines = [title, f"  {'method':<{width}}" + "".join(f"  {c:>8}" for c in CALLERS)]
    for m in sorted(counts.methods, key=lambda m: (-counts.generated(m), m)):
        mark = "  never called" if not counts.generated(m) else ""
        lines.append(f"  {m:<{width}}" + "".join(f"  {counts.by(m, c):>8}" for c in CALLERS)
                     + mark)
    for option, n in sorted(counts.options.items()):
        lines.append(f"  {option:<{width}}  {n:>8}  (generated calls passing the option)")
    for label, n in sorted(counts.configs.items()):
        lines.append(f"  config {label}: {n} machines")
    never = counts.never_called()
    lines.append(f"  {counts.examples} machines run; never called by a generated program: "
                 f"{', '.join(never) if never else 'none'}")
    for entry_id, n in sorted(counts.absorbed.items()):
        lines.append(f"  examples ended at expected failure {entry_id}: {n}")
    if counts.stopped:
        lines.append(f"  stopped at a deviation: {counts.stopped}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m properties.families.v1.api_calls",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--allocator", action="append", default=None,
                        help=f"a pool spec (repeatable; default {targets.DEFAULT_SPEC})")
    parser.add_argument("--xfails-file", default=None,
                        help="leave out the generator features its entries avoid")
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--max-examples", type=int, default=None)
    parser.add_argument("--max-steps", type=int, default=None)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # the pools' own warnings (a refused reset) are noise here
    for spec in args.allocator or [targets.DEFAULT_SPEC]:
        pool = targets.load(spec)
        entries = [e for e in (load_expected(args.xfails_file) if args.xfails_file else ())
                   if e.applies(pool.release or pool.version, FAMILY.target_of(pool).judges)]
        avoid = {name for e in entries for name in e.avoid}
        counts = count_calls(pool, args.profile, args.max_examples, args.max_steps, avoid,
                             entries)
        print(table(counts, f"{pool.name} {pool.version} ({spec}), profile {args.profile}"
                            + (f", avoiding {', '.join(sorted(avoid))}" if avoid else "")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
