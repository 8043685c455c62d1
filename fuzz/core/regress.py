"""Crash files and program JSON to plain pytest regression tests.

Accepted inputs:

- a crash file written by either engine (``crash-<harness>-<sha1>``) with its JSON sidecar:
  the sidecar's program is used as is;
- a raw fuzz input (e.g. libFuzzer's ``crash-<sha1>``): run again through the family's machine
  it names (:func:`harness_named`) against the target it failed on (a program follows the
  target's responses, so the target matters);
- JSON: a list of operations (what reproducer scripts and Hypothesis failures print), whose pool
  shape comes from the options, or ``{"config": {...}, "program": [...]}``.

The generated test replays the program under the oracle against the selected target (the
bundled allocator unless ``--allocator``/``$PREFIXCACHE_ALLOCATOR`` say otherwise): it fails
while the bug is there and passes once it is fixed.
"""

from __future__ import annotations

import json
import keyword
import pprint
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzz.core.machine_harness import MachineHarness, machine_level, machine_levels
from models.core.invariants import Violation
from properties.core import family as families
from properties.core.family import Family
from properties.core.replay import run_program
from properties.core.targets import Target

WIDTH = 96


@dataclass
class Regression:
    """A program worth keeping: its pool shape, operations, and how it failed (if it does
    against the target it was loaded with)."""

    config: dict[str, Any]  # the family's geometry
    program: list[Any]  # operations of the target's family
    source: str
    outcomes: list[Any]
    violation: str | None
    family: str = families.DEFAULT_FAMILY


def _is_program_json(data: bytes) -> Any:
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if isinstance(parsed, list) and all(isinstance(o, dict) and "op" in o for o in parsed):
        return parsed
    if isinstance(parsed, dict) and isinstance(parsed.get("program"), list):
        return parsed
    return None


def _number(value: Any) -> Any:
    """A pool size as an int (JSON may spell it ``4.0`` or ``"4"``); lists and flags as
    they are."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return value
    return int(value)


def harness_levels(family: Family) -> tuple[str, ...]:
    """The harness levels of ``family``: its machines, the default first."""
    return tuple(machine_levels(family))


def harness_named(family: Family, name: str | None = None) -> MachineHarness:
    """The machine harness ``name`` (None: the first) of ``family`` (a ``ValueError`` naming
    the known ones)."""
    return MachineHarness(machine_level(family, name), family=family.name)


def program_listing(family: Family, geometry: Mapping[str, Any], program: Sequence[Any],
                    outcomes: Sequence[Any] = ()) -> str:
    """``program`` as text a person reads: the shape, then one numbered line per operation
    (and what it returned, when known)."""
    lines = [f"config: {dict(geometry)}"]
    for i, op in enumerate(program):
        lines.append(f"{i:>3}. {op!r}" + (f"  -> {outcomes[i]!r}" if i < len(outcomes) else ""))
    return "\n".join(lines) + "\n"


def harness_from_name(path: Path, default: str, family: str | None = None) -> str:
    """The harness a crash file names (``crash-<harness>-...``, a machine level of
    ``family``, None: the default family's), else ``default``."""
    chosen = families.by_name(family) if family else families.default()
    for name in sorted(harness_levels(chosen), key=len, reverse=True):
        if path.name.startswith(f"crash-{name}-"):
            return name
    return default


def load(path: Path, target: Target, *, harness: str | None, shape: dict[str, Any]) -> Regression:
    """Read ``path`` (crash file or program JSON) into a regression, judged against
    ``target``. A raw input that does not reach a first operation is a ``ValueError``."""
    family = target.family_object
    data = path.read_bytes()
    sidecar = path.with_suffix(".json")
    parsed = _is_program_json(data)
    if parsed is None and path.suffix != ".json" and sidecar.is_file():
        parsed = json.loads(sidecar.read_text(encoding="utf-8"))
    if parsed is not None:
        if isinstance(parsed, dict):
            config = {k: _number(v) for k, v in parsed.get("config", shape).items()}
            ops_json = parsed["program"]
            source = f"{path.name} (harness {parsed.get('harness', '?')}, target "\
                     f"{parsed.get('target', '?')})"
        else:
            config, ops_json, source = dict(shape), parsed, path.name
        program = [family.vocabulary.op_from_json(o) for o in ops_json]
        outcomes, violation = judge(target, config, program)
        return Regression(config, program, source, outcomes, violation, family.name)
    name = harness or harness_from_name(path, harness_levels(family)[0], family.name)
    result = harness_named(family, name).bind(target).run(data)
    if result.config is None:
        raise ValueError(f"{path.name} does not reach a first operation on harness {name}")
    config = family.vocabulary.geometry(result.config)
    violation = None if result.violation is None else str(result.violation)
    return Regression(config, result.program, f"{path.name} (harness {name}, target "
                      f"{target.spec})", result.outcomes, violation, family.name)


def judge(target: Target, config: dict[str, Any],
          program: list[Any]) -> tuple[list[Any], str | None]:
    """Replay ``program`` against ``target``: its outcomes and the violation, if any."""
    family = target.family_object
    try:
        ran = run_program(target, family.vocabulary.config(target, config), program)
    except Violation as violation:
        return [], str(violation)
    except family.out_of_contract as why:
        return [], f"out of contract for this target: {why}"
    return [s.outcome for s in ran.log], None


def test_name(name: str) -> str:
    """A valid, lower-case identifier for ``name``."""
    ident = re.sub(r"\W+", "_", name.strip().lower()).strip("_") or "regression"
    if ident[0].isdigit() or keyword.iskeyword(ident):
        ident = f"r_{ident}"
    return ident


def _wrapped(text: str, indent: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines() or [""]:
        pieces = textwrap.wrap(line, WIDTH - len(indent), subsequent_indent="      ",
                               break_long_words=True, replace_whitespace=False,
                               drop_whitespace=False) or [""]
        out += [f"{indent}{p}".rstrip() for p in pieces]
    return out


def render_test(name: str, reg: Regression) -> str:
    """The source of ``tests/regressions/test_<name>.py``."""
    ident = test_name(name)
    family = families.by_name(reg.family)
    foreign = reg.family != families.DEFAULT_FAMILY  # the session's target may be another's
    listing = program_listing(family, reg.config, reg.program, reg.outcomes)
    doc = [f'"""Regression {ident}.', "", *_wrapped(f"From {reg.source}.", ""), ""]
    if reg.violation:
        doc += ["Violation when recorded:", "", *_wrapped(reg.violation, "    "), ""]
    doc += ["Program (one operation per line):", "", *_wrapped(listing, "    "), '"""']
    ops_lines: list[str] = []
    for op in reg.program:
        text = pprint.pformat(family.vocabulary.op_to_json(op), width=WIDTH - 4, compact=True,
                              sort_dicts=False)
        block = textwrap.indent(text, "    ").splitlines()
        block[-1] += ","
        ops_lines += block
    lines = [
        *[line.replace('"""', "'''") if i not in (0, len(doc) - 1) else line
          for i, line in enumerate(doc)],
        "",
        "from __future__ import annotations",
        "",
        "from properties.core.replay import replay_regression",
        "",
        *([f"FAMILY = {reg.family!r}"] if foreign else []),
        f"CONFIG = {reg.config!r}",
        "PROGRAM = [",
        *ops_lines,
        "]",
        "",
        "",
        f"def test_{ident}() -> None:",
        '    """Replays the program under the oracle against the selected target; passes once '
        'the bug',
        '    is fixed."""',
        f"    replay_regression(CONFIG, PROGRAM{', family=FAMILY' if foreign else ''})",
        "",
    ]
    return "\n".join(lines)


def write_test(name: str, reg: Regression, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    init = out_dir / "__init__.py"
    if not init.exists():
        init.write_text("", encoding="utf-8")
    path = out_dir / f"test_{test_name(name)}.py"
    path.write_text(render_test(name, reg), encoding="utf-8")
    return path
