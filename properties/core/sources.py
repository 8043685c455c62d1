"""Upstream sources, read without installing them: the machinery every family's loader shares.

A family's loader reads an upstream package's modules from a wheel/zip or a source tree (never
installing the engine), plans which dotted names are served by which file or stub, and executes
them through a meta path finder that answers for exactly the planned names. What is here knows
no family: the cache directory, ``pip download`` of a wheel into it, a wheel member extracted
beside it, the error types, reading metadata and module files, textual patches, and the plan's
loader and finder.

Contracts:

* Every module the plan loader creates carries :data:`MARKER` (its value: the origin), so a
  loader can tell its own modules from a real installed package (:func:`is_ours`).
* :func:`pip_download` keeps an existing wheel; it raises :class:`UpstreamSourceMissing` when pip
  fails or leaves no matching wheel.
* :func:`apply_patches`: each patch must match exactly once, else :class:`UpstreamSourceInvalid`.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path
from types import ModuleType
from typing import Protocol

__all__ = [
    "MARKER",
    "Entry",
    "PlanFinder",
    "PlanLoader",
    "Runner",
    "SourceFile",
    "SourceModules",
    "UpstreamError",
    "UpstreamSourceInvalid",
    "UpstreamSourceMissing",
    "apply_patches",
    "cache_dir",
    "is_ours",
    "parse_metadata",
    "pip_download",
    "read_modules",
    "with_packages",
]

# Attribute set on every module the plan loader creates; its value is the origin.
MARKER = "__prefixcache_upstream__"

Patch = tuple[str, str, str]  # (module relative to the top package, old text, new text)


class UpstreamError(ImportError):
    """Base of every error raised while locating or loading upstream code."""


class UpstreamSourceMissing(UpstreamError):
    """No upstream source was given and none could be found."""


class UpstreamSourceInvalid(UpstreamError):
    """A source exists but is not usable: bad path, missing modules, unknown imports."""


@dataclass(frozen=True)
class SourceFile:
    """One upstream module's text; ``filename`` is shown in tracebacks (a real path for trees)."""

    text: str
    filename: str


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/prefixcache`` (absolute XDG paths only), else ``~/.cache/prefixcache``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "prefixcache"


def parse_metadata(text: str) -> str | None:
    """``"<Name> <Version>"`` of a ``METADATA`` / ``PKG-INFO`` text, None if either is absent."""
    message = Parser().parsestr(text, headersonly=True)
    name, version = message.get("Name"), message.get("Version")
    return f"{name} {version}" if name and version else None


def extract_member(archive: zipfile.ZipFile, member: str, root: Path) -> Path:
    """``member`` of ``archive`` as a file under ``root`` (an extension module cannot be
    imported from a zip): kept when present with the same size, else written to a temporary
    name and renamed, so a concurrent run never reads half a file. Returns its path."""
    info = archive.getinfo(member)
    target = root / member
    if not target.is_file() or target.stat().st_size != info.file_size:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(archive.read(info))
        tmp.replace(target)
    return target


class Runner(Protocol):
    """How a command is run (``subprocess.run`` by default; tests pass a fake)."""

    def __call__(self, args: list[str], *, check: bool) -> object: ...


def pip_download(requirement: str, dest: Path, wheel: str, extra: Sequence[str],
                 runner: Runner | None) -> Path:
    """``pip download --no-deps`` of ``requirement`` into ``dest``; return the wheel there whose
    name matches the glob ``wheel`` (an exact file name, or a pattern where the platform tag
    varies by release).

    An existing wheel is kept. Raises ``UpstreamSourceMissing`` if pip fails or no such wheel
    is there afterwards.
    """
    found = sorted(dest.glob(wheel))
    if found:
        return found[0]
    dest.mkdir(parents=True, exist_ok=True)
    run: Runner = subprocess.run if runner is None else runner
    command = [sys.executable, "-m", "pip", "download", "--no-deps", *extra,
               "--dest", str(dest), requirement]
    try:
        run(command, check=True)
    except subprocess.CalledProcessError as exc:
        raise UpstreamSourceMissing(
            f"`{' '.join(command)}` failed with exit code {exc.returncode}"
        ) from exc
    found = sorted(dest.glob(wheel))
    if not found:
        raise UpstreamSourceMissing(f"pip finished but no {wheel} is in {dest}")
    return found[0]


@dataclass(frozen=True)
class SourceModules:
    """The module files read from one source, keyed by dotted name relative to its top package."""

    origin: str
    version: str
    files: dict[str, SourceFile]


def version_assignment(text: str) -> str | None:
    """The string assigned to ``__version__`` (or ``version``) at the top level of a module's
    source (``_version.py`` as setuptools_scm writes it, ``version.py``), parsed, never
    imported; None when there is none or the text does not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            targets = {t.id for t in node.targets if isinstance(t, ast.Name)}
            if targets & {"__version__", "version"}:
                return node.value.value
    return None


def read_modules(source: Path, top: str, modules: Mapping[str, bool]) -> SourceModules:
    """Read ``modules`` (dotted name relative to ``top`` -> required) from a wheel/zip holding
    ``<top>/`` at its root, or a tree that is (or holds) the ``top`` package directory.

    The version comes from the ``<top>-*.dist-info/METADATA`` beside the package, else
    ``"<top> unknown"``. Raises :class:`UpstreamSourceInvalid` for a path that is neither, and
    when a required module is missing.
    """
    files: dict[str, SourceFile] = {}
    version = f"{top} unknown"
    first = next(iter(modules), "")
    if source.is_dir():
        first_dir = first.rpartition(".")[0].replace(".", "/")
        root = source / top if (source / top / first_dir).is_dir() else source
        for rel in modules:
            path = root.joinpath(*rel.split(".")).with_suffix(".py")
            if path.is_file():
                files[rel] = SourceFile(path.read_text(encoding="utf-8"), str(path))
        for meta in sorted(root.parent.glob(f"{top}-*.dist-info/METADATA")):
            version = parse_metadata(meta.read_text(encoding="utf-8")) or version
        origin = str(root)
    elif source.is_file() and zipfile.is_zipfile(source):
        try:
            with zipfile.ZipFile(source) as archive:
                present = set(archive.namelist())
                for rel in modules:
                    member = f"{top}/" + rel.replace(".", "/") + ".py"
                    if member in present:
                        text = archive.read(member).decode("utf-8")
                        files[rel] = SourceFile(text, f"{source}/{member}")
                for member in sorted(present):
                    if member.endswith(".dist-info/METADATA") and member.count("/") == 1:
                        parsed = parse_metadata(archive.read(member).decode("utf-8", "replace"))
                        version = parsed or version
        except zipfile.BadZipFile as exc:
            raise UpstreamSourceInvalid(f"{source}: not a readable zip/wheel: {exc}") from exc
        origin = str(source)
    else:
        raise UpstreamSourceInvalid(f"{source}: neither a source tree nor a zip/wheel")
    missing = [rel for rel, required in modules.items() if required and rel not in files]
    if missing:
        names = ", ".join(f"{top}.{m}" for m in missing)
        raise UpstreamSourceInvalid(f"{origin}: upstream modules missing: {names}")
    return SourceModules(origin, version, files)


def apply_patches(files: Mapping[str, SourceFile], patches: Sequence[Patch], top: str
                  ) -> dict[str, SourceFile]:
    """``files`` with each (module, old, new) text edit applied; each ``old`` must occur once."""
    out = dict(files)
    for rel, old, new in patches:
        if rel not in out:
            raise UpstreamSourceInvalid(f"patch of {top}.{rel}: the source has no such module")
        text = out[rel].text
        if text.count(old) != 1:
            raise UpstreamSourceInvalid(
                f"patch of {top}.{rel}: {old!r} occurs {text.count(old)} times, not once"
            )
        out[rel] = SourceFile(text.replace(old, new), out[rel].filename + " (patched)")
    return out


# --------------------------------------------------------------------------- #
# Import machinery: a meta path finder that serves exactly the planned names.
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Entry:
    """How one planned name is served: a synthetic package, a stub builder, or a source file."""

    package: bool
    stub: Callable[[ModuleType], None] | None = None
    file: SourceFile | None = None


def with_packages(entries: dict[str, Entry]) -> dict[str, Entry]:
    """``entries`` completed with a synthetic package for every missing (or non-package)
    parent of a planned name; returns the same dict."""
    for name in list(entries):
        parts = name.split(".")
        for depth in range(1, len(parts)):
            parent = ".".join(parts[:depth])
            if parent not in entries or not entries[parent].package:
                entries[parent] = Entry(package=True)
    return entries


def is_ours(module: ModuleType | None) -> bool:
    """Whether ``module`` was created by a :class:`PlanLoader`."""
    return module is not None and hasattr(module, MARKER)


class PlanLoader(importlib.abc.InspectLoader):
    """Creates the planned modules: synthetic packages, engine stubs, upstream sources.

    ``stubbed`` collects the names served by stubs, in execution order."""

    def __init__(self, entries: Mapping[str, Entry], origin: str) -> None:
        self._entries = entries
        self._origin = origin
        self.stubbed: list[str] = []

    def is_package(self, fullname: str) -> bool:
        return self._entry(fullname).package

    def get_source(self, fullname: str) -> str | None:
        file = self._entry(fullname).file
        return None if file is None else file.text

    def exec_module(self, module: ModuleType) -> None:
        entry = self._entry(module.__name__)
        setattr(module, MARKER, self._origin)
        if entry.stub is not None:
            entry.stub(module)
            self.stubbed.append(module.__name__)
        elif entry.file is not None:
            code = compile(entry.file.text, entry.file.filename, "exec", dont_inherit=True)
            exec(code, vars(module))

    def _entry(self, fullname: str) -> Entry:
        try:
            return self._entries[fullname]
        except KeyError:
            raise ImportError(f"{fullname} is not served by this loader", name=fullname) from None


class PlanFinder(importlib.abc.MetaPathFinder):
    """Answers for the planned names only; everything else falls through."""

    def __init__(self, entries: Mapping[str, Entry], loader: PlanLoader) -> None:
        self._entries = entries
        self._loader = loader

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        entry = self._entries.get(fullname)
        if entry is None:
            return None
        origin = entry.file.filename if entry.file is not None else None
        spec = importlib.machinery.ModuleSpec(
            fullname, self._loader, origin=origin, is_package=entry.package
        )
        if entry.package:
            spec.submodule_search_locations = []
        spec.has_location = origin is not None
        return spec
