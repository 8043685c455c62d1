"""The oracle must share no code with what it judges: ``models`` imports only the standard
library and itself."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "models"


def test_models_import_only_the_standard_library_and_models() -> None:
    bad = []
    for path in sorted(MODELS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level \
                else []
            for name in names:
                top = name.split(".")[0]
                if top != "models" and top not in sys.stdlib_module_names and \
                        top != "__future__":
                    bad.append(f"{path.name}: {name}")
    assert bad == []
