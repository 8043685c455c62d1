"""Write one plain script per v1 xfails entry: ``conformance/vllm-<minor>/<id>.py``.

Usage: ``python conformance/render_v1_reproducers.py conformance/vllm-0.33.xfails.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from models.families.v1 import ops
from properties.families.v1.reproducer import config_of, render


def main(argv: list[str]) -> int:
    for name in argv:
        path = Path(name)
        minor = path.name.removesuffix(".xfails.json")
        out_dir = path.parent / minor
        out_dir.mkdir(exist_ok=True)
        for entry in json.loads(path.read_text(encoding="utf-8")):
            version = entry["versions"][0]
            program = [ops.from_json(r) for r in entry["program"]]
            title = f"{entry['id']} ({entry['class']}, {entry['family']}): vLLM {version}."
            text = render(version, config_of(entry["config"]), program, title,
                          touch_per_group=version == "0.11.0")
            (out_dir / f"{entry['id']}.py").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
