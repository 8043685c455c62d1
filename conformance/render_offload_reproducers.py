"""Write one plain script per offload xfails entry: ``conformance/vllm-<minor>/<id>.py``.

Usage: ``python conformance/render_offload_reproducers.py FILE...`` (the offload xfails files,
``conformance/vllm-<minor>.offload.xfails.json``).
Each script builds the release's manager from its cached wheel, makes the entry's calls one per
line (printing what the manager answers) and, run as a program, replays them under the offload
judge, which raises the entry's violation.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from models.core.invariants import Violation
from properties.core.reproducer import render_script
from properties.core.targets import load_target
from properties.families.offload.family import REF

#: Release -> its target in ``properties.upstream``.
TARGETS = {"0.34.0": "vllm_cpu_offload", "0.33.0": "vllm_v033_cpu_offload",
           "0.11.0": "vllm_v011_cpu_offload"}


def main(argv: list[str]) -> int:
    for name in argv:
        path = Path(name)
        minor = path.name.removesuffix(".offload.xfails.json")
        out_dir = path.parent / minor
        out_dir.mkdir(exist_ok=True)
        for entry in json.loads(path.read_text(encoding="utf-8")):
            version = entry["versions"][0]
            target = load_target(f"properties.upstream:{TARGETS[version]}", family=REF,
                                 allocator_type=entry.get("allocator_type") or None)
            family = target.family_object
            config = family.vocabulary.config(target, entry["config"])
            judge = family.judge(target, config)
            shown = None
            try:
                for op in entry["program"]:
                    judge.step(family.vocabulary.op_from_json(op))
            except Violation as violation:
                shown = violation
            if shown is None:
                print(f"{entry['id']}: the program no longer fails", file=sys.stderr)
                return 1
            text = render_script(target, config, judge.log, shown, judge)
            title = f"{entry['id']} ({entry['class']}, {entry['family']}): vLLM {version}."
            text = text.replace("Counterexample found by prefixcache.", title, 1)
            (out_dir / f"{entry['id']}.py").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
