"""The core knows no family, in meaning too: the code of ``models/core``, ``properties/core``
and ``fuzz/core``, and the fuzzers' command line ``fuzz/cli.py`` (names and string constants;
prose in docstrings and comments aside) names no family's concepts: no family name, field or
fuzz level. import-linter holds the imports (``pyproject.toml``; ``fuzz.cli`` imports no
family either); this holds the words, so a family's notion cannot creep into the core as a
literal or a parameter name.

The one exception is the registry's default family (``properties.core.family.DEFAULT_FAMILY``,
the family of a target no family accepts): configuration, not meaning.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORES = ("models/core", "properties/core", "fuzz/core")
#: Modules outside the cores held to the same rule: one core, many families.
FAMILY_AGNOSTIC = ("fuzz/cli.py",)

#: Words (parts of identifiers, or of strings) that belong to one family or another.
FORBIDDEN_PARTS = frozenset({
    "gpu", "cpu", "swap", "cow", "naive", "evictor", "vllm", "aphrodite", "sglang", "radix",
    "blocktable", "blockpool", "kvcachemanager", "lora", "toy", "offload",
})
#: Whole identifiers or keys that name one family's fields.
FORBIDDEN_NAMES = frozenset({
    "block_size", "prefix_caching", "num_gpu_blocks", "num_cpu_blocks", "num_blocks",
    "new_blocks", "new_table", "extra_hash", "chunks", "block_fields", "table_fields",
    "block_level", "sequence_level", "hashing",  # fuzz levels
})
#: ``(file, name)`` of the registry's default: the only place a family's name appears.
ALLOWED = {("properties/core/family.py", "DEFAULT_FAMILY")}


def _parts(word: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", word)
    return [p.lower() for p in re.split(r"[^A-Za-z0-9]+", spaced) if p]


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of ``tree``."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            found.add(id(node.value))  # a bare string statement documents the line above
    return found


def _words(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, word)`` for every identifier and non-docstring string of ``path``, except
    the allowed assignments."""
    rel = path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
            else None)
        if isinstance(target, ast.Name) and (rel, target.id) in ALLOWED:
            skip |= {id(n) for n in ast.walk(node)}
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in docs:
            continue
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name):
            yield line, node.id
        elif isinstance(node, ast.Attribute):
            yield line, node.attr
        elif isinstance(node, ast.arg) or (isinstance(node, ast.keyword) and node.arg):
            yield line, node.arg
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield line, node.name
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield line, node.value
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield line, node.module  # ``from fuzz.families.v0 import ...``
        elif isinstance(node, ast.alias):
            yield line, node.name


def offences(path: Path) -> list[str]:
    out = []
    for line, word in _words(path):
        for token in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", word):
            parts = set(_parts(token))
            if token.lower() in FORBIDDEN_NAMES or parts & FORBIDDEN_PARTS \
                    or token in ("v0", "v1"):
                out.append(f"{path.relative_to(ROOT)}:{line}: {token!r}")
    return out


SOURCES = sorted([*(p for core in CORES for p in (ROOT / core).glob("*.py")),
                  *(ROOT / path for path in FAMILY_AGNOSTIC)])


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_core_code_names_no_family_concept(path: Path) -> None:
    assert not offences(path)


def test_the_check_finds_a_family_import_and_level() -> None:
    """An import of a family's module and a fuzz level's name are caught too."""
    module = ROOT / "fuzz" / "_probe_for_test.py"
    module.write_text("from fuzz.families.v0 import tools\nimport fuzz.families.sglang.zoo\n"
                      "LEVEL = 'block_level'\n", encoding="utf-8")
    try:
        found = offences(module)
    finally:
        module.unlink()
    assert [f.split(": ", 1)[1] for f in found] == ["'v0'", "'sglang'", "'block_level'"]


def test_the_check_finds_a_family_word(tmp_path: Path) -> None:
    """The scan is not vacuous: a core-like module naming a family's field is caught, its
    docstring is not."""
    module = ROOT / "properties" / "core" / "_probe_for_test.py"
    module.write_text('"""Mentions num_gpu_blocks in prose."""\n'
                      'def f(config):\n    return config.num_gpu_blocks, "naive"\n',
                      encoding="utf-8")
    try:
        found = offences(module)
    finally:
        module.unlink()
    assert [f.split(": ", 1)[1] for f in found] == ["'num_gpu_blocks'", "'naive'"]
