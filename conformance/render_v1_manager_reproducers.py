"""Write one plain script per v1 manager xfails entry: ``conformance/vllm-<minor>/<id>.py``.

Usage: ``python conformance/render_v1_manager_reproducers.py
conformance/vllm-0.33.manager.xfails.json`` (needs torch and the cached wheel).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from models.families.v1 import request_ops as ops
from properties.families.v1.request.reproducer import render
from properties.families.v1.request.target import (
    ManagerConfig,
    ManagerTarget,
    vllm_v033_manager,
    vllm_v034_manager,
    vllm_v1_manager,
)

TARGETS = {"0.34.0": vllm_v034_manager, "0.33.0": vllm_v033_manager}  # others: the default


def main(argv: list[str]) -> int:
    for name in argv:
        path = Path(name)
        minor = path.name.removesuffix(".manager.xfails.json")
        out_dir = path.parent / minor
        out_dir.mkdir(exist_ok=True)
        for entry in json.loads(path.read_text(encoding="utf-8")):
            target: ManagerTarget = TARGETS.get(entry["versions"][0], vllm_v1_manager)()
            program = [ops.from_json(r) for r in entry["program"]]
            title = (f"{entry['id']}\n({entry['class']}, {entry['family']}): vLLM "
                     f"{entry['versions'][0]} KVCacheManager.")
            text = render(target, ManagerConfig.from_json(entry["config"]), program, title)
            (out_dir / f"{entry['id']}.py").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
