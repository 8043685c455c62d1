"""Counterexamples as plain Python: the calls the runner made, in order, against the target's
own API, followed by an oracle re-check of the same program.

The script needs nothing but the target and this package; running it prints the violation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from models.capabilities import Config
from models.families import Violation
from models.operations import op_to_json
from properties.calls import render
from properties.runner import Step
from properties.targets import Target


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
    """The program as a JSON list of operations (what ``python -m properties.replay`` reads)."""
    return json.dumps([op_to_json(s.op) for s in steps])


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
        code = [render(stmt) for stmt in step.stmts]
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
        "    from properties.replay import check_program",
        f"    check_program({target.spec!r}, {target.allocator_type!r}, "
        f"{config.block_size}, {config.num_gpu_blocks}, {config.num_cpu_blocks},",
        f"                  {program_json(steps)!r})",
    ]
    return "\n".join(lines) + "\n"
