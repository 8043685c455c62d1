"""One row per mutant: module, mutant, status, automatic message flag, changed lines.

Status: ``killed`` / ``survived`` / ``timeout`` / ``no_tests`` from mutmut's results,
``unexecuted`` (plan.py: the run never executes the changed statement), ``not_run`` (an
executed mutant mutmut has not tested yet). The flag ``message`` marks mutants that change
only error-message, log or argument-name text (checked by hand in survivors.md).
Writes ``mutwork/table.tsv``.
"""

from __future__ import annotations

import ast
import difflib
import io
import json
import re
import tokenize
from collections import Counter
from pathlib import Path

from modules import MODULES

STATUS = {
    0: "survived",
    1: "killed",
    33: "no_tests",
    36: "timeout",
    24: "timeout",
    -24: "timeout",
    152: "timeout",
    37: "typecheck",
    None: "not_run",
}
ERROR_CALL = re.compile(r"\b\w*(Error|Exception)\(")
#: calls whose string argument only names the argument in an error message, or logs
MESSAGE_CALLS = (
    "checked_list(",
    "checked_blocks(",
    "check_count(",
    "check_positive(",
    "check_block(",
    "_encode_int(",
    "logger.",
    "warnings.warn(",
)
SKIP = (
    tokenize.NEWLINE,
    tokenize.NL,
    tokenize.ENDMARKER,
    tokenize.COMMENT,
    tokenize.INDENT,
    tokenize.DEDENT,
)


def tokens(line: str) -> list[tuple[int, str]]:
    try:
        return [
            (t.type, t.string)
            for t in tokenize.generate_tokens(io.StringIO(line.strip()).readline)
            if t.type not in SKIP
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [(-1, line.strip())]


def _only_strings(line: str) -> bool:
    """``line`` is string literals and punctuation only (a continuation of a call)."""
    return all(t in (tokenize.STRING, tokenize.OP) for t, _ in tokens(line)) and any(
        t == tokenize.STRING for t, _ in tokens(line)
    )


def _before_first_change(a: str, b: str) -> str:
    """The source of ``a`` up to (and without) its first token that ``b`` changes."""
    ta, tb = tokens(a), tokens(b)
    first = next((i for i, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y), len(ta))
    return " ".join(t for _, t in ta[:first]).replace(" (", "(").replace("( ", "(")


def only_strings_differ(a: str, b: str) -> bool:
    ta, tb = tokens(a), tokens(b)
    if len(ta) != len(tb):
        return False
    diff = [(x, y) for x, y in zip(ta, tb, strict=True) if x != y]
    return bool(diff) and all(x[0] == tokenize.STRING == y[0] for x, y in diff)


def is_message_only(minus: list[str], plus: list[str], context: str) -> bool:
    if len(minus) != 1 or len(plus) != 1:
        return False
    a, b = minus[0], plus[0]
    # A line that is only a string literal continues a call above it: judge by the context.
    # On any other line the changed string must follow a raise, an error constructor or a
    # call that takes an argument's name (``b"i" + _encode_int(x, "name")``: the tag is data).
    where = context if _only_strings(a) else _before_first_change(a, b)
    in_message = (
        "raise " in where
        or bool(ERROR_CALL.search(where))
        or any(c in where for c in MESSAGE_CALLS)
    )
    if b.rstrip(",") == "None" and re.match(r"^f?[\"']", a) and "raise " in context:
        return True
    if only_strings_differ(a, b) and in_message:
        return True
    none_message = re.compile(r"(Error|Exception)\(None\)")
    if none_message.search(b) and not none_message.search(a):
        return True
    for call in MESSAGE_CALLS:
        if call in a and call in b:
            ta, tb = tokens(a), tokens(b)
            if len(ta) == len(tb):
                diff = [(x, y) for x, y in zip(ta, tb, strict=True) if x != y]
                if diff and all(
                    x[0] == tokenize.STRING and y == (tokenize.NAME, "None") for x, y in diff
                ):
                    return True
    return False


def function_bodies(path: Path) -> dict[str, list[str]]:
    source = path.read_text()
    lines = source.splitlines()
    return {
        node.name: lines[node.lineno - 1 : node.end_lineno]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def mutated_body(bodies: dict[str, list[str]], short: str) -> list[str]:
    """The mutant's function source with mutmut's name suffixes removed."""
    return [re.sub(r"__mutmut_\w+\(", "(", line) for line in bodies[short]]


def changes(bodies: dict[str, list[str]], short: str) -> tuple[list[str], list[str], str]:
    """Removed lines, added lines and their context (2 lines before) of mutant ``short``."""
    original = mutated_body(bodies, re.sub(r"__mutmut_\d+$", "", short) + "__mutmut_orig")
    mutated = mutated_body(bodies, short)
    minus: list[str] = []
    plus: list[str] = []
    context: list[str] = []
    matcher = difflib.SequenceMatcher(a=original, b=mutated, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            minus += [x.strip() for x in original[i1:i2]]
            plus += [x.strip() for x in mutated[j1:j2]]
            context += [x.strip() for x in original[max(0, i1 - 2) : i2]]
    return minus, plus, " ".join(context)


def main() -> None:
    rows: list[tuple[str, ...]] = []
    for module in MODULES:
        meta = json.loads(Path(f"mutants/prefixcache/{module}.py.meta").read_text())
        unexecuted = set(Path(f"mutwork/unexecuted_{module}.txt").read_text().split())
        bodies = function_bodies(Path(f"mutants/prefixcache/{module}.py"))
        for key, code in meta["exit_code_by_key"].items():
            short = key.split(".", 2)[2]
            minus, plus, context = changes(bodies, short)
            status = STATUS.get(code, f"code{code}")
            if key in unexecuted and status in ("not_run", "no_tests", "survived"):
                status = "unexecuted"
            flag = "message" if is_message_only(minus, plus, context) else ""
            diff = " | ".join(["- " + m for m in minus] + ["+ " + p for p in plus])
            rows.append((module, short, status, flag, diff))
    Path("mutwork/table.tsv").write_text("".join("\t".join(r) + "\n" for r in rows))
    for module in MODULES:
        print(module, dict(sorted(Counter(r[2] for r in rows if r[0] == module).items())))


if __name__ == "__main__":
    main()
