"""Public API coverage of a v1 ``KVCacheManager``: how often the request machine's generated
programs call each public method (and property) of the manager class.

The block level's counting (:mod:`properties.families.v1.api_calls`: a counting subclass,
callers found on the stack) applied to the manager: the target builds the counting subclass
(``ManagerTarget.manager_cls``) and the request machine
(:func:`properties.families.v1.request.machine.bind`) runs against it as ``prefixcache check``
runs it: once per manager configuration, under a Hypothesis profile (default ``ci``,
derandomized), without the shrink phase. Callers:

* ``program``: an operation of a generated program (``RequestExecutor._apply``);
* ``observe``: the judge reading the manager after a step (``RequestExecutor.check``, its
  snapshots, block tables and the hit each waiting request would get now);
* ``internal``: the manager calling its own public method inside one of those calls.

The request level has no misuse probes yet: its ``misuse`` column stays zero. A method is
*never called* when no generated program called it. Given ``--xfails-file``, the run leaves
out the generator features the applicable entries ``avoid`` and ends an example quietly at a
violation an entry matches (by family, operation, message, ``after`` and tokens).

CLI::

    python -m properties.families.v1.request.api_calls \\
        --allocator properties.upstream:vllm_v1_manager \\
        --xfails-file conformance/vllm-0.34.manager.xfails.json
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from hypothesis.stateful import run_state_machine_as_test

import properties.core.profiles  # noqa: F401  (registers the suite's profiles)
from models.core.invariants import Violation
from properties.core import selection
from properties.core.determinism import fixed_constants
from properties.core.plugin import ExpectedFailure, load_expected
from properties.families.v1.api_calls import (
    Counts,
    absorb,
    census_settings,
    counting_class,
    public_methods,
    table,
)
from properties.families.v1.request.executor import RequestExecutor
from properties.families.v1.request.family import DEFAULT_SPEC, FAMILY, manager_of
from properties.families.v1.request.machine import bind, checked_avoid
from properties.families.v1.request.target import CONFIGS, ManagerConfig, ManagerTarget

__all__ = ["count_calls", "counting", "main"]

# Innermost suite frame -> who made the call (the block level's callers).
_FRAMES: dict[Any, str] = {
    RequestExecutor._apply.__code__: "program",
    RequestExecutor.check.__code__: "observe",
    RequestExecutor._snapshot.__code__: "observe",
    RequestExecutor._tables.__code__: "observe",
    RequestExecutor._probe_hit.__code__: "observe",
}


def counting(manager: ManagerTarget, counts: Counts | None = None
             ) -> tuple[ManagerTarget, Counts]:
    """``manager`` building a subclass of its ``KVCacheManager`` that counts the public
    methods' and properties' calls."""
    cls = manager.manager_class
    counts = Counts(public_methods(cls, properties=True)) if counts is None else counts
    return replace(manager, manager_cls=counting_class(cls, counts, _FRAMES)), counts


def _counted_init(init: Any, name: str, counts: Counts) -> Any:
    """``init`` counting the machines it builds under ``name``. A closure, not default
    arguments: Hypothesis seeds a derandomized machine from its ``__init__`` signature, and a
    default's repr holds an address that differs from process to process."""
    def counted_init(self: Any) -> None:
        counts.configs[name] = counts.configs.get(name, 0) + 1
        init(self)

    return counted_init


def count_calls(manager: ManagerTarget, spec: str = DEFAULT_SPEC, profile: str = "ci",
                max_examples: int | None = None, max_steps: int | None = None,
                avoid: Iterable[str] = (), entries: Sequence[ExpectedFailure] = (),
                configs: dict[str, ManagerConfig] | None = None) -> Counts:
    """Run the request machine over ``manager`` (counted), once per configuration of
    ``configs`` (default: the machines' four), under ``profile`` (optionally with fewer
    examples or steps), leaving out ``avoid`` and ending an example at a violation one of
    ``entries`` matches; the calls its programs made. ``counts.configs``: machines per
    configuration name."""
    counted, counts = counting(manager)
    target = FAMILY.target_of(counted, spec)
    run_settings = census_settings(profile, max_examples, max_steps)
    avoided = checked_avoid(avoid)
    for name, config in (configs or CONFIGS).items():
        machine = bind(config, name="ApiCallsMachine")
        machine.avoid = avoided
        machine.__init__ = _counted_init(  # type: ignore[method-assign]
            machine.__init__, name, counts)
        if entries:
            absorb(machine, entries, counts)
        try:
            with selection.kept(), fixed_constants():
                selection.use(target)
                run_state_machine_as_test(machine, settings=run_settings)
        except Violation as v:
            counts.stopped = f"{name}: {str(v).splitlines()[0]}"
            break
    counts.examples = sum(counts.configs.values())
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m properties.families.v1.request.api_calls",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--allocator", action="append", default=None,
                        help=f"a manager spec (repeatable; default {DEFAULT_SPEC})")
    parser.add_argument("--xfails-file", default=None,
                        help="leave out the generator features its entries avoid, and end an "
                             "example at a violation an entry matches")
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--max-examples", type=int, default=None)
    parser.add_argument("--max-steps", type=int, default=None)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    for spec in args.allocator or [DEFAULT_SPEC]:
        target = FAMILY.load_target(spec)
        manager = manager_of(target)
        entries = [e for e in (load_expected(args.xfails_file) if args.xfails_file else ())
                   if e.applies(target.release or target.version, target.judges)]
        avoid = {name for e in entries for name in e.avoid}
        counts = count_calls(manager, spec, args.profile, args.max_examples, args.max_steps,
                             avoid, entries)
        print(table(counts, f"{target.name} {target.version} KVCacheManager ({spec}), "
                            f"profile {args.profile}"
                            + (f", avoiding {', '.join(sorted(avoid))}" if avoid else "")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
