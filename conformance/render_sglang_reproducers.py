"""Write one plain script per SGLang xfails entry: ``conformance/<xfails name>/<id>.py``.

Usage: ``python conformance/render_sglang_reproducers.py SPEC XFAILS`` (``SPEC``: the target,
e.g. ``properties.upstream:sglang_radix_cache``). The program is replayed under the sglang
family's judge; the script is the core's reproducer (the driver's calls, then the replay).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from models.core.invariants import Violation
from properties.core.reproducer import render_script
from properties.core.targets import load_target
from properties.families.sglang.family import REF


def main(argv: list[str]) -> int:
    spec, name = argv
    path = Path(name)
    out_dir = path.parent / path.name.removesuffix(".xfails.json")
    out_dir.mkdir(exist_ok=True)
    target = load_target(spec, family=REF)
    vocabulary = target.family_object.vocabulary
    for entry in json.loads(path.read_text(encoding="utf-8")):
        config = vocabulary.config(target, entry["config"])
        judge = target.family_object.judge(target, config)
        violation: Violation | None = None
        try:
            for op in entry["program"]:
                judge.step(vocabulary.op_from_json(op))
        except Violation as found:
            violation = found
        text = render_script(target, config, judge.log, violation)
        header = f"# {entry['id']} ({entry['class']}, {entry['family']})\n# target: {spec}\n"
        (out_dir / f"{entry['id']}.py").write_text(header + text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
