"""Run vLLM's own v0 block unit tests against the bundled allocator, by import rename.

``python conformance/upstream_unit_tests.py [--release 0.8.5] [--index-url URL]
[--work-dir DIR] [--xfails FILE] [-- extra pytest args]``

1. The release's sdist (``vllm-<release>.tar.gz``) is found through the package index's
   PEP 691 JSON (``--index-url``, else ``$PREFIXCACHE_INDEX_URL``, else
   ``https://pypi.org/simple/``), downloaded with urllib, checked against the index's sha256
   and cached in ``properties.core.sources.cache_dir()``. A cached file is reused after its hash
   is checked again (against the index; offline, against the hash recorded when it was
   downloaded and verified, with a note). No usable index and no verified copy: exit 2.
2. Only ``tests/core/block/{__init__,conftest,test_naive_block,test_block_table,
   test_cpu_gpu_block_allocator,test_common,test_prefix_caching_block}.py`` (and the package
   markers ``tests/__init__.py``, ``tests/core/__init__.py``, empty when absent) are extracted
   into a temporary work directory. Not ``test_block_manager.py`` or ``e2e/``: they drive the
   engine (``SelfAttnBlockSpaceManager``, the scheduler, models), which prefixcache does not
   provide.
3. Imports are rewritten by :data:`MAPPING` and nothing else of the text changes:
   ``vllm.core.block.<mod>`` -> ``prefixcache.<mod>``, ``vllm.utils`` -> ``prefixcache.utils``,
   ``vllm.sequence`` and ``tests.core.utils`` -> ``upstream_stand_ins`` (our own minimal
   sequence, ``conformance/upstream_stand_ins.py``). Every imported name is checked to exist in
   its new module. An import of anything else that is neither the standard library nor pytest
   (a new upstream module, ``import vllm...``, a ``"vllm..."`` string such as a patch target)
   raises :class:`UnmappedImport`: a new release cannot silently test upstream's own code.
4. pytest runs on the work directory in a subprocess (``-q -p no:cacheprovider -n 2``, rootdir
   the work directory with its own empty ``pytest.ini``, this repository's pytest11 plugins
   disabled, ``PYTEST_ADDOPTS`` dropped), the repository and ``conformance/`` on ``PYTHONPATH``.
5. Expected failures: ``conformance/vllm-0.8.unit-tests.xfails.json`` maps node ids to a
   ``reason`` naming the departure of ``docs/CONTRACT.md`` they pin; a generated ``conftest.py``
   marks them ``xfail(strict=True)``, so each must still fail. An entry whose test is not
   collected (``pytest --collect-only`` of the rewritten tests, before the run) is an error.
6. A summary per file (passed / xfailed / failed / errors / skipped); the exit status is
   pytest's (non-zero on any failure, stale entry or XPASS).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from properties.core.sources import cache_dir  # noqa: E402

DEFAULT_RELEASE = "0.8.5"
DEFAULT_INDEX = "https://pypi.org/simple/"
INDEX_ENV = "PREFIXCACHE_INDEX_URL"
PROJECT = "vllm"
DEFAULT_XFAILS = HERE / "vllm-0.8.unit-tests.xfails.json"
STAND_INS = "upstream_stand_ins"  # conformance/upstream_stand_ins.py, on the run's PYTHONPATH

#: The test files run (relative to the sdist's top directory); each must be in the sdist.
TEST_FILES = tuple(
    f"tests/core/block/{name}.py"
    for name in (
        "__init__",
        "conftest",
        "test_naive_block",
        "test_block_table",
        "test_cpu_gpu_block_allocator",
        "test_common",
        "test_prefix_caching_block",
    )
)
#: Package markers: taken from the sdist if there, else created empty.
PACKAGE_MARKERS = ("tests/__init__.py", "tests/core/__init__.py")

#: Upstream module -> the module that stands in for it. Nothing else is rewritten.
MAPPING: dict[str, str] = {
    **{
        f"vllm.core.block.{mod}": f"prefixcache.{mod}"
        for mod in (
            "block_table",
            "common",
            "cpu_gpu_block_allocator",
            "interfaces",
            "naive_block",
            "prefix_caching_block",
            "utils",
        )
    },
    "vllm.utils": "prefixcache.utils",  # Device, cdiv, chunk_list
    "vllm.sequence": STAND_INS,  # Logprob
    "tests.core.utils": STAND_INS,  # create_dummy_sequence, create_dummy_lora_sequence
}
#: Imported as they are: the standard library and the test runner.
UNMAPPED_ALLOWED = frozenset(sys.stdlib_module_names) | {"pytest", "_pytest"}


class UpstreamTestsError(Exception):
    """Base of the errors this script reports (message printed, exit status 2)."""


class UnmappedImport(UpstreamTestsError):
    """An upstream test imports (or names in a string) a module the mapping does not know."""


class MissingName(UpstreamTestsError):
    """A name imported from a mapped module does not exist in its stand-in."""


class IndexUnavailable(UpstreamTestsError):
    """The package index cannot be read, or does not list the release's sdist."""


class HashMismatch(UpstreamTestsError):
    """A downloaded or cached sdist does not have the index's sha256."""


class SdistInvalid(UpstreamTestsError):
    """The sdist lacks a file this script runs."""


class StaleXfail(UpstreamTestsError):
    """The xfails file is malformed or names a test that no longer exists."""


# --- 1. the sdist ------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexFile:
    url: str
    sha256: str


def index_file(project: str, filename: str, index_url: str) -> IndexFile:
    """The url and sha256 of ``filename`` on the index's PEP 691 JSON page of ``project``."""
    page = urllib.parse.urljoin(index_url.rstrip("/") + "/", f"{project}/")
    request = urllib.request.Request(
        page, headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            data = json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise IndexUnavailable(f"cannot read the package index page {page}: {exc}") from exc
    for entry in data.get("files", []):
        if entry.get("filename") == filename:
            sha = entry.get("hashes", {}).get("sha256")
            if not sha:
                raise IndexUnavailable(f"{page} lists {filename} without a sha256 hash")
            return IndexFile(urllib.parse.urljoin(page, entry["url"]), sha.lower())
    raise IndexUnavailable(f"{page} does not list {filename}")


def verify(path: Path, sha256: str) -> None:
    """Raise :class:`HashMismatch` unless the file's sha256 is ``sha256``."""
    with path.open("rb") as handle:
        actual = hashlib.file_digest(handle, "sha256").hexdigest()
    if actual != sha256.lower():
        raise HashMismatch(f"{path}: sha256 {actual}, the index says {sha256}")


def download(url: str, dest: Path, sha256: str) -> Path:
    """Download ``url`` to ``dest`` (via a temporary file beside it), verified first."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name, suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=300) as response:
                    shutil.copyfileobj(response, out)
            except (urllib.error.URLError, OSError) as exc:
                raise IndexUnavailable(f"cannot download {url}: {exc}") from exc
        verify(tmp, sha256)
        tmp.chmod(0o644)
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def fetch_sdist(release: str, index_url: str, cache: Path | None = None) -> Path:
    """The verified sdist of ``vllm==release``: the cached copy if its hash is right, else a
    fresh download. Offline, a copy whose hash was recorded at its verified download is used."""
    filename = f"{PROJECT}-{release}.tar.gz"
    cache = cache_dir() if cache is None else cache
    path = cache / filename
    recorded = path.with_name(filename + ".sha256")
    try:
        info = index_file(PROJECT, filename, index_url)
    except IndexUnavailable as exc:
        if path.is_file() and recorded.is_file():
            verify(path, recorded.read_text(encoding="utf-8").strip())
            print(f"note: {exc}; using the cached {path}, verified against the hash recorded "
                  "at its download", file=sys.stderr)
            return path
        raise
    if path.is_file():
        try:
            verify(path, info.sha256)
        except HashMismatch as exc:
            print(f"note: {exc}; downloading it again", file=sys.stderr)
            path.unlink()
    if not path.is_file():
        download(info.url, path, info.sha256)
    recorded.write_text(info.sha256 + "\n", encoding="utf-8")
    return path


# --- 2. extraction -----------------------------------------------------------------------------


def extract(sdist: Path, work: Path) -> list[Path]:
    """Write :data:`TEST_FILES` and :data:`PACKAGE_MARKERS` of the sdist under ``work``
    (paths relative to the sdist's top directory); return the test files written."""
    wanted = {*TEST_FILES, *PACKAGE_MARKERS}
    found: dict[str, bytes] = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar:
            _top, _, rel = member.name.partition("/")
            if rel in wanted and member.isfile():
                handle = tar.extractfile(member)
                if handle is not None:
                    found[rel] = handle.read()
    missing = [rel for rel in TEST_FILES if rel not in found]
    if missing:
        raise SdistInvalid(f"{sdist} lacks {', '.join(missing)}")
    written = []
    for rel in sorted(wanted):
        target = work / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(found.get(rel, b""))
        if rel in TEST_FILES:
            written.append(target)
    return written


# --- 3. the import rename ----------------------------------------------------------------------


def _top_level_names_of_strings(tree: ast.AST) -> Iterable[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            head = node.value.split(".", 1)[0]
            if head in ("vllm", "tests") and node.value.replace(".", "").isidentifier():
                yield node.lineno, node.value


def rewrite_imports(text: str, filename: str = "<text>",
                    mapping: Mapping[str, str] = MAPPING) -> tuple[str, dict[str, set[str]]]:
    """``text`` with each ``from <upstream> import ...`` of ``mapping`` pointed at its stand-in;
    only the module name in those statements changes. Returns the new text and, per stand-in
    module, the names imported from it (for :func:`check_names`).

    Raises :class:`UnmappedImport` for an import that is neither mapped, nor the standard
    library or pytest, for ``import <mapped>`` (its uses would still name upstream), for a
    relative import, and for a string constant naming a ``vllm``/``tests`` module.
    """
    tree = ast.parse(text, filename)
    lines = text.splitlines(keepends=True)
    names: dict[str, set[str]] = defaultdict(set)
    for node in ast.walk(tree):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                head = alias.name.split(".", 1)[0]
                if alias.name in mapping or head not in UNMAPPED_ALLOWED:
                    raise UnmappedImport(f"{where}: `import {alias.name}` cannot be renamed "
                                         "(only `from MODULE import NAMES` of the mapping)")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                raise UnmappedImport(f"{where}: relative import {'.' * node.level}{module}")
            if module in mapping:
                line = lines[node.lineno - 1]
                old = f"from {module} import"
                if line.count(old) != 1:
                    raise UnmappedImport(f"{where}: `{old}` is not on the statement's first line")
                lines[node.lineno - 1] = line.replace(old, f"from {mapping[module]} import")
                names[mapping[module]].update(alias.name for alias in node.names)
            elif module.split(".", 1)[0] not in UNMAPPED_ALLOWED:
                raise UnmappedImport(f"{where}: `from {module} import ...` is not in the mapping")
    for lineno, value in _top_level_names_of_strings(tree):
        raise UnmappedImport(f"{filename}:{lineno}: the string {value!r} names an upstream module")
    return "".join(lines), dict(names)


def check_names(names: Mapping[str, Iterable[str]]) -> None:
    """Raise :class:`MissingName` unless every name exists in its (importable) module."""
    for module_name, wanted in sorted(names.items()):
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise MissingName(f"cannot import the stand-in module {module_name}: {exc}") from exc
        absent = sorted(name for name in wanted if name == "*" or not hasattr(module, name))
        if absent:
            raise MissingName(f"{module_name} lacks {', '.join(absent)}")


def rewrite_tree(files: Iterable[Path]) -> dict[str, set[str]]:
    """Rewrite each file in place; return every stand-in module's imported names."""
    all_names: dict[str, set[str]] = defaultdict(set)
    for path in files:
        text, names = rewrite_imports(path.read_text(encoding="utf-8"), str(path))
        path.write_text(text, encoding="utf-8")
        for module, wanted in names.items():
            all_names[module].update(wanted)
    return dict(all_names)


# --- 5. expected failures ----------------------------------------------------------------------


def load_xfails(path: Path) -> dict[str, str]:
    """``{node id: reason}`` of an xfails file: ``{"entries": [{"id", "reason"}, ...]}``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = data["entries"]
        xfails = {entry["id"]: entry["reason"] for entry in entries}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StaleXfail(f"{path}: not an xfails file ({exc})") from exc
    if len(xfails) != len(entries):
        raise StaleXfail(f"{path}: an id is listed twice")
    for node_id, reason in xfails.items():
        if not isinstance(reason, str) or not reason.strip():
            raise StaleXfail(f"{path}: {node_id} has no reason")
    return xfails


_CONFTEST = '''\
# Generated by conformance/upstream_unit_tests.py: the expected failures, strict.
import pytest

XFAILS = {xfails!r}


def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = XFAILS.get(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
'''


def check_stale(xfails: Iterable[str], collected: Iterable[str]) -> None:
    """Raise :class:`StaleXfail` if an entry names a test that is not collected."""
    stale = sorted(set(xfails) - set(collected))
    if stale:
        raise StaleXfail("xfails entries name tests that do not exist (remove them): "
                         + ", ".join(stale))


def write_conftest(work: Path, xfails: Mapping[str, str]) -> Path:
    """The work directory's root ``conftest.py`` applying ``xfails`` as strict xfails."""
    path = work / "conftest.py"
    path.write_text(_CONFTEST.format(xfails=dict(sorted(xfails.items()))), encoding="utf-8")
    return path


# --- 4. and 6. the run and its summary ---------------------------------------------------------


def own_pytest_plugins() -> list[str]:
    """The pytest11 entry-point names this repository installs (disabled for the run)."""
    try:
        dist = metadata.distribution("prefixcache")
    except metadata.PackageNotFoundError:
        return []
    return sorted(ep.name for ep in dist.entry_points if ep.group == "pytest11")


def pytest_command(work: Path, junit: Path | None, extra: Iterable[str], workers: int) -> list[str]:
    """pytest on the work directory: its own rootdir and ini, this repo's plugins disabled."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--rootdir={work}", "-c", str(work / "pytest.ini")]
    if junit is not None:
        command += [f"--junitxml={junit}", "-o", "junit_family=xunit1"]
    for name in own_pytest_plugins():
        command += ["-p", f"no:{name}"]
    if workers > 0:
        command += ["-n", str(workers)]
    return [*command, *extra, "tests/core/block"]


def summarize(junit: Path) -> dict[str, Counter[str]]:
    """Outcome counts per test file of a JUnit report (xunit1: each case names its file)."""
    per_file: dict[str, Counter[str]] = defaultdict(Counter)
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("file") or case.get("classname") or "?"
        kinds = {child.tag: child for child in case}
        if "failure" in kinds:
            outcome = "failed"
        elif "error" in kinds:
            outcome = "errors"
        elif "skipped" in kinds:
            skipped = kinds["skipped"]
            outcome = "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
        else:
            outcome = "passed"
        per_file[name][outcome] += 1
    return dict(per_file)


def print_summary(per_file: Mapping[str, Counter[str]]) -> None:
    columns = ("passed", "xfailed", "failed", "errors", "skipped")
    print("\nupstream unit tests on the bundled allocator:")
    total: Counter[str] = Counter()
    for name in sorted(per_file):
        counts = per_file[name]
        total.update(counts)
        print(f"  {name}: " + ", ".join(f"{counts[c]} {c}" for c in columns if counts[c]))
    print("  total: " + ", ".join(f"{total[c]} {c}" for c in columns))


def prepare(work: Path, release: str, index_url: str) -> None:
    """Fetch, extract, rewrite and check the tests; write the run's ``pytest.ini``."""
    sdist = fetch_sdist(release, index_url)
    files = extract(sdist, work)
    check_names(rewrite_tree(files))
    (work / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def collect(work: Path) -> list[str]:
    """The node ids of the work directory's tests (``pytest --collect-only -q``, one process)."""
    command = [*pytest_command(work, None, [], 0), "--collect-only"]
    done = subprocess.run(command, cwd=work, env=_env(), check=False,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SdistInvalid(f"collecting the rewritten tests failed:\n{done.stdout}{done.stderr}")
    return [line.strip() for line in done.stdout.splitlines() if "::" in line]


def run(work: Path, extra: list[str], workers: int) -> int:
    junit = work / "junit.xml"
    command = pytest_command(work, junit, extra, workers)
    print("$ " + " ".join(command), flush=True)
    code = subprocess.run(command, cwd=work, env=_env(), check=False).returncode
    if junit.is_file():
        print_summary(summarize(junit))
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Arguments after `--` go to pytest.",
    )
    parser.add_argument("--release", default=DEFAULT_RELEASE,
                        help=f"vLLM release whose sdist's tests run (default {DEFAULT_RELEASE})")
    parser.add_argument("--index-url", default=os.environ.get(INDEX_ENV) or DEFAULT_INDEX,
                        help=f"PEP 691 simple index (default ${INDEX_ENV}, else {DEFAULT_INDEX})")
    parser.add_argument("--work-dir", type=Path,
                        help="where the rewritten tests go (must not exist or be empty; kept)")
    parser.add_argument("--xfails", type=Path, default=DEFAULT_XFAILS,
                        help="expected failures (default: %(default)s)")
    parser.add_argument("-n", "--workers", type=int, default=2,
                        help="pytest-xdist workers, 0 for none (default 2)")
    args, extra = parser.parse_known_args(argv)
    if extra and extra[0] == "--":
        extra = extra[1:]
    if args.work_dir is not None:
        work = args.work_dir.resolve()
        if work.exists() and any(work.iterdir()):
            parser.error(f"--work-dir {work} exists and is not empty")
        work.mkdir(parents=True, exist_ok=True)
        keep = True
    else:
        work = Path(tempfile.mkdtemp(prefix="upstream-unit-tests-"))
        keep = False
    try:
        try:
            prepare(work, args.release, args.index_url)
            xfails = load_xfails(args.xfails)
            check_stale(xfails, collect(work))
            write_conftest(work, xfails)
        except UpstreamTestsError as exc:
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        return run(work, extra, args.workers)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
