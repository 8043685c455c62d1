"""Counterexamples as plain Python: the calls the judge made, in order, against the target's
own API, followed by a re-check of the same program under the judge.

The script needs nothing but the target and this package; running it prints the violation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from models.core.invariants import Violation
from properties.core.calls import render
from properties.core.family import Judge, Step, Vocabulary
from properties.core.targets import Target


def program_json(steps: Sequence[Step], vocabulary: Vocabulary) -> str:
    """The program as a JSON list of operations (``python -m properties.core.replay`` reads it)."""
    return json.dumps([vocabulary.op_to_json(s.op) for s in steps])


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


def render_script(target: Target, config: Any, steps: Sequence[Step],
                  violation: Violation | None = None, judge: Judge | None = None) -> str:
    """A runnable script replaying ``steps`` against ``target`` (``judge``: the one that ran
    them; None: the family builds what it needs to name the modules the calls use).

    The family writes its parts (:meth:`~properties.core.family.Family.script`): building the
    allocator and the calls, and the replay under the judge that ``__main__`` runs; the core
    writes the rest."""
    script = target.family_object.script(target, config, steps, judge)
    lines = ['"""Counterexample found by prefixcache.']
    if violation is not None:
        lines += ["", *str(violation).replace('"""', "'''").splitlines()]
    lines += ['"""', *script.body]
    lines += [
        "",
        'if __name__ == "__main__":',
        "    # Re-run the same program under the judge; raises the violation above.",
        *[f"    {line}" for line in script.check],
    ]
    return "\n".join(lines) + "\n"


def logged_calls(steps: Sequence[Any]) -> list[str]:
    """The calls each step logged (``Step.stmts``, :mod:`properties.core.calls`), one
    ``# step i`` comment first; a step that raised runs inside ``try`` and prints the error."""
    lines: list[str] = []
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
    return lines


def family_arg(target: Target) -> str:
    """``, family=NAME`` unless the target's family is the one detection picks anyway."""
    from properties.core import family as families

    return "" if families.select(target.spec).name == target.family \
        else f", family={target.family!r}"
