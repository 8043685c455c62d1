"""The documentation is a user's guide whose every citation resolves.

- Every repository path cited in a Markdown file, or in a comment or docstring of a Python
  file, exists; every Markdown link to a file (and its ``#anchor``) resolves; every section
  reference such as ``docs/API.md §4.3`` or ``docs/INVARIANTS.md §LRU`` names a heading of
  that document.
- No Markdown, Python or TOML file, nor .ci/run, cites this project's issue numbers or dated
  diary entries (the patterns and their examples are in ``test_issue_pattern`` and
  ``test_diary_pattern``); an upstream tracker's issue (``vllm-project/vllm#55092``) is fine.
- README.md is at most 300 lines and keeps the "Run the tests" block that .ci/run extracts.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Top-level folders whose paths, written in prose, are citations of repository files.
CITED_ROOTS = ("docs", "conformance", "tests", "properties", "models", "fuzz", "benchmarks",
               "prefixcache", ".ci", ".clusterfuzzlite")

#: Paths the docs write that are not files of this repository: examples of files a user
#: creates, and outputs the tools write.
EXAMPLE_PATHS = frozenset({
    "conformance/my-vllm.xfails.json",
    "conformance/my-allocator.xfails.json",
    "benchmarks/results.json",
})

#: Folders of vLLM's own repository (its unit tests), cited as upstream's, not ours.
UPSTREAM_PATHS = ("tests/core/", "tests/v1/core", "tests/v1/kv_offload/", "tests/v1/kv_connector/")

#: A placeholder segment of a path pattern: ``fuzz/families/NAME/fuzz_LEVEL.py``, ``ID.py``.
_PLACEHOLDER = re.compile(r"(?:^|[/_])(?:NAME|LEVEL|ID|FILE|SPEC|REV|VERSION|FAMILY|TARGET)"
                          r"(?=$|[/_.])")

_PATH = re.compile(
    r"(?<![\w./~-])((?:" + "|".join(re.escape(r) for r in CITED_ROOTS)
    + r")/[\w./-]*)(.?)")
_MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
_SECTION_REF = re.compile(
    r"(?:docs/)?(API|INVARIANTS)\.md((?:(?:,| and| or)? ?§[\w.]+(?:-[\d.]+)?)+)")
_SECTION = re.compile(r"§([\w.]+?)(?:-([\d.]+))?(?=$|[^\w.]|\.(?:\s|$))")

#: Names of upstream projects whose issue numbers may be cited.
_UPSTREAM = r"(?:vllm|sglang|aphrodite|hypothesis|pytest|cpython|python|atheris|mutmut|torch|mypy)"
_ISSUE = re.compile(r"\bissues?\s*#?\s*\d+|\(#\d+\)", re.IGNORECASE)
_UPSTREAM_BEFORE = re.compile(
    _UPSTREAM + r"[\w./-]*(?:'s)?\s*(?:\(|PR\s*)?$|github\.com/\S*/$", re.IGNORECASE)
_DIARY = re.compile(
    r"\b20\d\d-[01]\d-[0-3]\d\b"
    r"|\bthis session\b|\bsessions? \d+\b|\b(?:first|second|third|fourth|fifth) session\b"
    r"|\bsessions of\b|\btoday'?s?\b|\byesterday\b",
    re.IGNORECASE)


@cache
def repo_files() -> tuple[Path, ...]:
    """Files tracked by git (every file under the root when git is unavailable)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode()
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
                ".hypothesis", "reports"}
        names = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*")
                 if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]
    return tuple(ROOT / n for n in sorted(names) if (ROOT / n).is_file())


def files(*suffixes: str) -> list[Path]:
    return [p for p in repo_files() if p.suffix in suffixes]


def python_prose(path: Path) -> str:
    """The comments and docstrings of a Python file, one per line."""
    source = path.read_text(encoding="utf-8")
    parts: list[str] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            parts.append(tok.string)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                parts.append(doc)
    return "\n".join(parts)


@cache
def prose(path: Path) -> str:
    """What a file says to readers: Python's comments and docstrings, any other file whole."""
    if path.suffix == ".py":
        return python_prose(path)
    return path.read_text(encoding="utf-8")


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- cited paths and sections -------------------------------------------------------------------

def cited_paths(text: str) -> Iterator[str]:
    """Repository paths written in ``text``, without placeholders, globs or example files."""
    for match in _PATH.finditer(text):
        path, follower = match.group(1), match.group(2)
        if follower in ("<", "*", "{", "$"):
            continue  # a pattern: tests/zoo/<family>/, conformance/*.json, ...
        path = path.rstrip(".")
        if (path in EXAMPLE_PATHS or path.rstrip("/") in CITED_ROOTS
                or path.startswith(UPSTREAM_PATHS)):
            continue
        if _PLACEHOLDER.search(path):
            continue
        yield path


@cache
def headings(doc: str) -> tuple[str, ...]:
    """The heading texts of ``docs/<doc>``."""
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    return tuple(line.lstrip("#").strip() for line in text.splitlines()
                 if re.match(r"#{1,6} ", line))


def has_section(doc: str, section: str) -> bool:
    """Whether ``docs/<doc>`` has a heading numbered or named ``section`` ("4.3", "12", "LRU")."""
    for heading in headings(doc):
        words = heading.replace("`", "").split()
        if words and (words[0].rstrip(".:") == section or words[0] == section + "."):
            return True
    return False


def section_refs(text: str) -> Iterator[tuple[str, str]]:
    """``(document, section)`` for each ``docs/API.md §4.3``-style reference in ``text``."""
    for match in _SECTION_REF.finditer(text):
        doc = match.group(1) + ".md"
        for sec in _SECTION.finditer(match.group(2)):
            yield doc, sec.group(1).rstrip(".")
            if sec.group(2):
                yield doc, sec.group(2).rstrip(".")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    return {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def broken_links(path: Path) -> Iterator[str]:
    """Markdown links of ``path`` whose file or anchor does not exist."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    for target in _MD_LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            yield f"{target} (no such file)"
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            yield f"{target} (no heading #{anchor})"


def test_cited_paths_exist() -> None:
    missing = [f"{rel(p)}: {cited}" for p in files(".md", ".py")
               for cited in cited_paths(prose(p)) if not (ROOT / cited).exists()]
    assert not missing, "cited paths that do not exist:\n" + "\n".join(missing)


def test_markdown_links_resolve() -> None:
    broken = [f"{rel(p)}: {link}" for p in files(".md") for link in broken_links(p)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_section_references_resolve() -> None:
    refs = [(p, doc, sec) for p in files(".md", ".py") for doc, sec in section_refs(prose(p))]
    assert len(refs) > 20, "the section references were not found at all"
    unresolved = [f"{rel(p)}: docs/{doc} §{sec}" for p, doc, sec in refs
                  if not has_section(doc, sec)]
    assert not unresolved, "sections that no heading names:\n" + "\n".join(unresolved)


def test_api_and_invariants_are_cited_by_repo_path() -> None:
    """Outside docs/, the two documents are cited as ``docs/API.md``, never a bare name."""
    bare = re.compile(r"(?<![\w/.-])(API|INVARIANTS)\.md")
    found = [f"{rel(p)}: {m.group(0)}" for p in files(".md", ".py")
             if not rel(p).startswith("docs/") for m in bare.finditer(prose(p))]
    assert not found, "bare citations (write docs/API.md, docs/INVARIANTS.md):\n" + "\n".join(found)


# -- no issue numbers, no diary -----------------------------------------------------------------

def own_issue_citations(text: str) -> Iterator[str]:
    """This project's issue references in ``text`` (upstream trackers' are allowed)."""
    for match in _ISSUE.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        before = text[max(line_start, match.start() - 60):match.start()]
        if _UPSTREAM_BEFORE.search(before):
            continue
        yield match.group(0)


def diary_entries(text: str) -> Iterator[str]:
    for match in _DIARY.finditer(text):
        yield match.group(0)


def test_no_own_issue_numbers_or_diary() -> None:
    found: list[str] = []
    for path in [*files(".md", ".py", ".toml"), ROOT / ".ci" / "run"]:
        text = prose(path)
        found += [f"{rel(path)}: {hit!r}" for hit in own_issue_citations(text)]
        found += [f"{rel(path)}: {hit!r}" for hit in diary_entries(text)]
    assert not found, "issue numbers or dated diary entries:\n" + "\n".join(found)


def test_xfails_explanations_have_no_issue_numbers_or_diary() -> None:
    found = [f"{rel(p)}: {hit!r}" for p in files(".json") if rel(p).startswith("conformance/")
             for text in [p.read_text(encoding="utf-8")]
             for hit in [*own_issue_citations(text), *diary_entries(text)]]
    assert not found, "issue numbers or dated diary entries:\n" + "\n".join(found)


@pytest.mark.parametrize(("text", "expected"), [
    ("fixed in issue 18, defect 1", ["issue 18"]),
    ("see issue #4's score", ["issue #4"]),
    ("as measured (#7)", ["(#7)"]),
    ("Issues 20 and 22", ["Issues 20"]),
    ("the Mamba form is vLLM issue #57580", []),
    ("vllm-project/vllm#55092 and sglang#35270", []),
    ("vllm-project/vllm PR #43569", []),
    ("mutant `held_block_id` #7 (the owner)", []),
    ("vLLM 0.33.0 and Hypothesis 6.170.17", []),
])
def test_issue_pattern(text: str, expected: list[str]) -> None:
    assert list(own_issue_citations(text)) == expected


@pytest.mark.parametrize(("text", "caught"), [
    ("measured on 2026-12-04", True),
    ("the held-out batch of 2026-12-04", True),
    ("in this session", True),
    ("the second session of that day", True),
    ("today's run", True),
    ("merged 2026-03 upstream", False),
    ("seed 20261202", False),
    ("the session's target", False),
    ("vLLM 0.11.0", False),
])
def test_diary_pattern(text: str, caught: bool) -> None:
    assert bool(list(diary_entries(text))) == caught


@pytest.mark.parametrize(("text", "refs"), [
    ("(docs/API.md §4.5 splits them)", [("API.md", "4.5")]),
    ("docs/API.md §4 and §4.5: alloc", [("API.md", "4"), ("API.md", "4.5")]),
    ("(docs/API.md §13.1-13.2)", [("API.md", "13.1"), ("API.md", "13.2")]),
    ("docs/API.md §3.", [("API.md", "3")]),
    ("docs/INVARIANTS.md §LRU", [("INVARIANTS.md", "LRU")]),
])
def test_section_pattern(text: str, refs: list[tuple[str, str]]) -> None:
    assert list(section_refs(text)) == refs


@pytest.mark.parametrize(("text", "paths"), [
    ("see `docs/CONTRACT.md` and conformance/vllm-0.8/.",
     ["docs/CONTRACT.md", "conformance/vllm-0.8/"]),
    ("`tests/zoo/<family>/` and `conformance/*.json`", []),
    ("fuzz/families/NAME/fuzz_LEVEL.py", []),
    ("vLLM's tests/core/block tests", []),
    ("properties/missing.py", ["properties/missing.py"]),
    ("``docs/INVARIANTS.md``; docs/API.md.", ["docs/INVARIANTS.md", "docs/API.md"]),
])
def test_path_pattern(text: str, paths: list[str]) -> None:
    assert list(cited_paths(text)) == paths


def test_section_resolution_can_fail() -> None:
    assert has_section("API.md", "4.3") and has_section("INVARIANTS.md", "LRU")
    assert not has_section("API.md", "4.9") and not has_section("INVARIANTS.md", "I7")


# -- the README ---------------------------------------------------------------------------------

def test_readme_is_a_short_guide_with_the_ci_test_command() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; keep it a guide (<= 300)"
    # .ci/run: awk '/^Run the tests/ {f = 1} f && /^```bash/ {getline; print; exit}'
    start = next(i for i, line in enumerate(lines) if line.startswith("Run the tests"))
    fence = next(i for i in range(start, len(lines)) if lines[i].startswith("```bash"))
    command = lines[fence + 1]
    assert "pytest" in command and command.startswith("python3 -m venv .venv"), command
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "/^Run the tests/" in ci, ".ci/run no longer reads the README's test command"
