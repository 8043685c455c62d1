"""Crash files and program JSON to plain pytest regression tests.

Accepted inputs:

- a crash file written by either engine (``crash-<harness>-<sha1>``) with its JSON sidecar:
  the sidecar's program is used as is;
- a raw fuzz input (e.g. libFuzzer's ``crash-<sha1>``): decoded again with the harness against
  the target it failed on (decoding follows the target's responses, so the target matters);
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzz.core.harness import Harness
from fuzz.core.listing import format_program
from fuzz.families.v0.decoder import Level
from models.core.invariants import Violation
from models.families.v0.capabilities import Config
from models.families.v0.operations import Op, Outcome, op_from_json, op_to_json
from models.families.v0.oracle import OutOfContract
from properties.core.replay import run_program
from properties.core.targets import Target

WIDTH = 96


@dataclass
class Regression:
    """A program worth keeping: its pool shape, operations, and how it failed (if it does
    against the target it was loaded with)."""

    config: dict[str, int]
    program: list[Op]
    source: str
    outcomes: list[Outcome]
    violation: str | None


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


def harness_from_name(path: Path, default: str) -> str:
    """The harness a crash file names (``crash-<harness>-...``), else ``default``."""
    for level in Level:
        if path.name.startswith(f"crash-{level.value}-"):
            return level.value
    return default


def load(path: Path, target: Target, *, harness: str | None, shape: dict[str, int]) -> Regression:
    """Read ``path`` (crash file or program JSON) into a regression, judged against
    ``target``."""
    data = path.read_bytes()
    sidecar = path.with_suffix(".json")
    parsed = _is_program_json(data)
    if parsed is None and path.suffix != ".json" and sidecar.is_file():
        parsed = json.loads(sidecar.read_text(encoding="utf-8"))
    if parsed is not None:
        if isinstance(parsed, dict):
            config = {k: int(v) for k, v in parsed.get("config", shape).items()}
            ops_json = parsed["program"]
            source = f"{path.name} (harness {parsed.get('harness', '?')}, target "\
                     f"{parsed.get('target', '?')})"
        else:
            config, ops_json, source = dict(shape), parsed, path.name
        program = [op_from_json(o) for o in ops_json]
        outcomes, violation = judge(target, config, program)
        return Regression(config, program, source, outcomes, violation)
    name = harness or harness_from_name(path, Level.BLOCK.value)
    result = Harness(Level(name)).bind(target).run(data)
    cfg = result.config
    config = {"block_size": cfg.block_size, "num_gpu_blocks": cfg.num_gpu_blocks,
              "num_cpu_blocks": cfg.num_cpu_blocks}
    violation = None if result.violation is None else str(result.violation)
    return Regression(config, result.program, f"{path.name} (harness {name}, target "
                      f"{target.spec})", result.outcomes, violation)


def judge(target: Target, config: dict[str, int],
          program: list[Op]) -> tuple[list[Outcome], str | None]:
    """Replay ``program`` against ``target``: its outcomes and the violation, if any."""
    runner = None
    try:
        runner = run_program(target, Config(caps=target.caps, **config), program)
    except Violation as violation:
        return [], str(violation)
    except OutOfContract as why:
        return [], f"out of contract for this target: {why}"
    return [s.outcome for s in runner.log], None


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
    cfg = Config(reg.config["block_size"], reg.config["num_gpu_blocks"],
                 reg.config["num_cpu_blocks"])
    listing = format_program(cfg, reg.program, reg.outcomes)
    doc = [f'"""Regression {ident}.', "", *_wrapped(f"From {reg.source}.", ""), ""]
    if reg.violation:
        doc += ["Violation when recorded:", "", *_wrapped(reg.violation, "    "), ""]
    doc += ["Program (one operation per line):", "", *_wrapped(listing, "    "), '"""']
    ops_lines: list[str] = []
    for op in reg.program:
        text = pprint.pformat(op_to_json(op), width=WIDTH - 4, compact=True, sort_dicts=False)
        block = textwrap.indent(text, "    ").splitlines()
        block[-1] += ","
        ops_lines += block
    lines = [
        *[line.replace('"""', "'''") if i not in (0, len(doc) - 1) else line
          for i, line in enumerate(doc)],
        "",
        "from __future__ import annotations",
        "",
        "import pytest",
        "",
        "from models.families.v0.capabilities import Config",
        "from models.families.v0.operations import op_from_json",
        "from models.families.v0.oracle import OutOfContract",
        "from properties.core.replay import run_program",
        "from properties.core.selection import current_target",
        "",
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
        "    target = current_target()",
        "    config = Config(caps=target.caps, **CONFIG)",
        "    try:",
        "        run_program(target, config, [op_from_json(op) for op in PROGRAM])",
        "    except OutOfContract as why:",
        '        pytest.skip(f"out of contract for {target.describe()}: {why}")',
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
