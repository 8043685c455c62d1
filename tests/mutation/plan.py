"""Split mutmut's mutants by whether `pytest properties` executes the statement they change.

A mutant whose changed statements are never executed by the run cannot be killed by it, so it
is classified without running (status ``unexecuted``). Statements come from a coverage data
file of the same run (same profile and budget); a changed line maps to the innermost statement
that spans it, a changed ``def`` line (defaults) always counts as executed.

Usage (from the scratch copy, after mutmut generated ``mutants/``):
    python mutwork/plan.py COVERAGE_DATA MODULE...
Writes ``mutwork/executed_<module>.txt`` and ``mutwork/unexecuted_<module>.txt``.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import sys
from pathlib import Path

import coverage

FuncNode = ast.FunctionDef | ast.AsyncFunctionDef


def function_nodes(source: str) -> dict[str, FuncNode]:
    """Original functions keyed by mutmut's mangled name (``x_f``, ``xǁClassǁmethod``)."""
    out: dict[str, FuncNode] = {}
    for node in ast.parse(source).body:
        if isinstance(node, FuncNode):
            out["x_" + node.name] = node
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, FuncNode):
                    out[f"xǁ{node.name}ǁ{sub.name}"] = sub
    return out


def innermost_statement(func: FuncNode, line: int) -> int:
    """First line of the smallest statement of ``func`` that spans ``line``."""
    best: ast.stmt | None = None
    for node in ast.walk(func):
        if isinstance(node, ast.stmt):
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end and (
                best is None or end - node.lineno <= (best.end_lineno or best.lineno) - best.lineno
            ):
                best = node
    return best.lineno if best is not None else line


def changed_lines(func: FuncNode, original: list[str], mutated: list[str]) -> set[int]:
    """Lines of the original file that the mutant's body differs on."""
    matcher = difflib.SequenceMatcher(a=original[1:], b=mutated[1:], autojunk=False)
    lines: set[int] = set()
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i1 == i2:  # pure insertion: attribute it to the line before
            lines.add(func.lineno + max(i1, 1))
        lines.update(func.lineno + 1 + i for i in range(i1, i2))
    return lines


def split_module(cov: coverage.Coverage, module: str) -> tuple[list[str], list[str]]:
    original_path = Path(f"prefixcache/{module}.py").resolve()
    source = original_path.read_text()
    lines = source.splitlines()
    functions = function_nodes(source)
    missing = set(cov.analysis2(str(original_path))[3])
    mutated_source = Path(f"mutants/prefixcache/{module}.py").read_text()
    mutated_lines = mutated_source.splitlines()
    mutated = {
        node.name: mutated_lines[node.lineno - 1 : node.end_lineno]
        for node in ast.walk(ast.parse(mutated_source))
        if isinstance(node, FuncNode)
    }
    meta = json.loads(Path(f"mutants/prefixcache/{module}.py.meta").read_text())
    executed: list[str] = []
    unexecuted: list[str] = []
    for key in meta["exit_code_by_key"]:
        short = key.split(".", 2)[2]
        func = functions[re.sub(r"__mutmut_\d+$", "", short)]
        original = lines[func.lineno - 1 : func.end_lineno]
        statements = {
            innermost_statement(func, line)
            for line in changed_lines(func, original, mutated[short])
        }
        if statements and func.lineno not in statements and statements <= missing:
            unexecuted.append(key)
        else:
            executed.append(key)
    return executed, unexecuted


def main() -> None:
    data_file, *modules = sys.argv[1:]
    cov = coverage.Coverage(data_file=data_file)
    cov.load()
    for module in modules:
        executed, unexecuted = split_module(cov, module)
        Path(f"mutwork/executed_{module}.txt").write_text("".join(k + "\n" for k in executed))
        Path(f"mutwork/unexecuted_{module}.txt").write_text("".join(k + "\n" for k in unexecuted))
        print(f"{module}: {len(executed)} executed, {len(unexecuted)} never executed")


if __name__ == "__main__":
    main()
