"""Counterexamples as plain Python: the calls the runner made, in order, against the target's
own API, followed by an oracle re-check of the same program.

The script needs nothing but the target and this package; running it prints the violation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from models.core.invariants import Violation
from models.families.v0.capabilities import Config
from models.families.v0.operations import op_to_json
from properties.core.calls import render
from properties.core.targets import Target
from properties.families.v0.runner import Step


def _factory_lines(target: Target, config: Config) -> list[str]:
    module, _, path = target.spec.partition(":")
    root = path.split(".", 1)[0]
    extra = "".join(f", {k}={v!r}" for k, v in target.factory_kwargs)
    return [
        f"from {module} import {root}",
        "",
        f"alloc = {path}({target.allocator_type!r}, {config.num_gpu_blocks}, "
        f"{config.num_cpu_blocks}, {config.block_size}{extra})",
    ]


def program_json(steps: Sequence[Step]) -> str:
    """The program as a JSON list of operations (``python -m properties.core.replay`` reads it)."""
    return json.dumps([op_to_json(s.op) for s in steps])


def fold_repeats(code: list[str], max_period: int = 4, min_repeats: int = 3) -> list[str]:
    """``code`` with each run of ``min_repeats`` or more back-to-back copies of the same group of
    up to ``max_period`` lines written as one ``for`` loop: the same statements in the same order
    (a ``HitBurst`` of 1001 queries prints 3 lines, not 2002)."""
    out: list[str] = []
    i = 0
    while i < len(code):
        best_period, best_count = 0, 1
        for period in range(1, max_period + 1):
            group = code[i:i + period]
            if len(group) < period:
                break
            count = 1
            while code[i + count * period:i + (count + 1) * period] == group:
                count += 1
            if count >= min_repeats and count * period > best_count * max(best_period, 1):
                best_period, best_count = period, count
        if best_period:
            out.append(f"for _ in range({best_count}):")
            out += [f"    {line}" for line in code[i:i + best_period]]
            i += best_period * best_count
        else:
            out.append(code[i])
            i += 1
    return out


def render_script(target: Target, config: Config, steps: Sequence[Step], device_module: str,
                  table_module: str, violation: Violation | None = None) -> str:
    """A runnable script replaying ``steps`` against ``target``."""
    lines = ['"""Counterexample found by prefixcache.']
    if violation is not None:
        lines += ["", *str(violation).splitlines()]
    # The allocator is created before Device and BlockTable are imported: a loader-backed
    # target (e.g. upstream code from a wheel) registers those modules when it builds one.
    lines += ['"""', *_factory_lines(target, config),
              f"from {device_module} import Device  # noqa: E402, F401",
              f"from {table_module} import BlockTable  # noqa: E402, F401"]
    for i, step in enumerate(steps):
        lines.append(f"# step {i}: {step.op!r}")
        code = fold_repeats([render(stmt) for stmt in step.stmts])
        if step.outcome.error is None:
            lines += code
            continue
        lines.append("try:")
        lines += [f"    {c}" for c in code]
        lines.append("except Exception as exc:")
        lines.append(f"    print('step {i} raised', repr(exc))  # observed: {step.outcome.detail}")
    lines += [
        "",
        'if __name__ == "__main__":',
        "    # Re-run the same program under the oracle; raises the violation above.",
        "    from properties.core.replay import check_program",
        f"    check_program({target.spec!r}, {target.allocator_type!r}, "
        f"{config.block_size}, {config.num_gpu_blocks}, {config.num_cpu_blocks},",
        f"                  {program_json(steps)!r})",
    ]
    return "\n".join(lines) + "\n"
