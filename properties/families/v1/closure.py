"""Resolve the import closure of upstream modules inside a wheel or source tree.

Starting from root modules (``vllm.v1.core.block_pool``, ...), every import a module executes
when it is loaded (module level, including ``try`` and ``if`` bodies, but not ``if
TYPE_CHECKING:``) is followed within the source. Each name of the closure is then served one of
three ways:

* **real**: the upstream file, executed as is, when it is in the source and its own closure
  loads (a third-party import is real when it is installed and not forbidden, e.g. torch at the
  block level);
* **stand-in, by policy**: the engine plumbing in :attr:`Policy.stubs` (logging, ``envs``,
  configuration, platforms, the request, events), never followed;
* **stand-in, as a fallback**: a name in :attr:`Policy.fallbacks` whose real module cannot load
  (e.g. vLLM 0.11's monolithic ``vllm.utils``, which imports torch; ``cbor2`` when it is not
  installed).

Anything else that cannot load is a :class:`ClosureError` naming the missing module, why it is
missing and the import chain that reached it. Imports inside functions are not followed; when
their target is a policy stand-in it is planned anyway, so that lazy upstream imports of
plumbing resolve. Packages are synthetic (their ``__init__.py`` is not executed) unless a module
imports a name from the package that is not one of its submodules.

The version is read from the source: a wheel's ``*.dist-info/METADATA``, or for a tree the
``dist-info`` beside the package, else ``<top>/_version.py``'s ``__version__``, else
``"<top> unknown"``.
"""

from __future__ import annotations

import ast
import importlib.util
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from properties.core.sources import (
    SourceFile,
    UpstreamSourceInvalid,
    parse_metadata,
    version_assignment,
)

__all__ = ["Closure", "ClosureError", "Edge", "Policy", "Source", "imports_of", "resolve"]

Builder = Callable[[ModuleType], None]


class ClosureError(UpstreamSourceInvalid):
    """A module of the closure cannot be loaded, real or stand-in; the message names it, why,
    and the import chain from a root."""

    def __init__(self, origin: str, missing: str, why: str, chain: Sequence[str]) -> None:
        self.missing = missing
        self.chain = tuple(chain)
        super().__init__(f"{origin}: cannot load {missing}: {why}; import chain: "
                         f"{' -> '.join(self.chain)}")


class Source:
    """Random access to the files of a wheel/zip (``<top>/`` at its root) or a tree that is
    (or holds) the ``top`` package directory."""

    def __init__(self, path: Path, top: str) -> None:
        self.top = top
        self._zip: zipfile.ZipFile | None = None
        self._root: Path | None = None
        if path.is_dir():
            self._root = path / top if (path / top).is_dir() else path
            self.origin = str(self._root)
        elif path.is_file() and zipfile.is_zipfile(path):
            try:
                self._zip = zipfile.ZipFile(path)
                self._names = set(self._zip.namelist())
            except zipfile.BadZipFile as exc:
                raise UpstreamSourceInvalid(f"{path}: not a readable zip/wheel: {exc}") from exc
            self.origin = str(path)
        else:
            raise UpstreamSourceInvalid(f"{path}: neither a source tree nor a zip/wheel")
        self.version = self._read_version()

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()

    def _tree(self) -> Path:
        if self._root is None:
            raise UpstreamSourceInvalid(f"{self.origin}: not a source tree")
        return self._root

    def _read(self, member: str) -> SourceFile | None:
        """``member`` (a path under the source root, ``top/...`` for the package)."""
        if self._zip is not None:
            if member not in self._names:
                return None
            return SourceFile(self._zip.read(member).decode("utf-8"), f"{self.origin}/{member}")
        path = self._tree().parent.joinpath(*member.split("/"))
        if not path.is_file():
            return None
        return SourceFile(path.read_text(encoding="utf-8"), str(path))

    def module(self, name: str) -> tuple[SourceFile, bool] | None:
        """(file, is_package) of the dotted ``name`` (``top.…``), None if the source has none."""
        base = name.replace(".", "/")
        init = self._read(f"{base}/__init__.py")
        if init is not None:
            return init, True
        plain = self._read(f"{base}.py")
        return (plain, False) if plain is not None else None

    def has_module(self, name: str) -> bool:
        base = name.replace(".", "/")
        if self._zip is not None:
            return f"{base}.py" in self._names or f"{base}/__init__.py" in self._names
        path = self._tree().parent.joinpath(*base.split("/"))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    def _read_version(self) -> str:
        unknown = f"{self.top} unknown"
        if self._zip is not None:
            for member in sorted(self._names):
                if member.endswith(".dist-info/METADATA") and member.count("/") == 1:
                    parsed = parse_metadata(self._zip.read(member).decode("utf-8", "replace"))
                    if parsed:
                        return parsed
            return unknown
        for meta in sorted(self._tree().parent.glob(f"{self.top}-*.dist-info/METADATA")):
            parsed = parse_metadata(meta.read_text(encoding="utf-8"))
            if parsed:
                return parsed
        found = self._read(f"{self.top}/_version.py")
        version = version_assignment(found.text) if found is not None else None
        return f"{self.top} {version}" if version else unknown


# --------------------------------------------------------------------------- #
# Imports of one module
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Edge:
    """One import statement: ``import target`` (``names`` empty) or ``from target import
    names``; ``optional`` when it sits in a ``try`` that handles ``ImportError``; ``lazy``
    when it runs inside a function (only when called)."""

    target: str
    names: tuple[str, ...] = ()
    optional: bool = False
    lazy: bool = False


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _handles_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        kinds = handler.type
        names = ([kinds] if not isinstance(kinds, ast.Tuple) else list(kinds.elts)) \
            if kinds is not None else []
        if kinds is None or any(isinstance(k, ast.Name) and k.id in
                                ("ImportError", "ModuleNotFoundError", "Exception")
                                for k in names):
            return True
    return False


def imports_of(text: str, name: str, is_package: bool) -> list[Edge]:
    """The imports of module ``name`` (see :class:`Edge`), relative ones resolved."""
    package = name if is_package else name.rpartition(".")[0]
    edges: list[Edge] = []

    def absolute(module: str | None, level: int) -> str:
        if level == 0:
            return module or ""
        base = package.split(".")
        base = base[: len(base) - (level - 1)]
        return ".".join([*base, module] if module else base)

    def walk(body: Sequence[ast.stmt], optional: bool, lazy: bool) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                edges.extend(Edge(a.name, (), optional, lazy) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.module == "__future__":
                    continue
                target = absolute(node.module, node.level)
                edges.append(Edge(target, tuple(a.name for a in node.names), optional, lazy))
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    walk(node.body, optional, lazy)
                walk(node.orelse, optional, lazy)
            elif isinstance(node, ast.Try):
                walk(node.body, optional or _handles_import_error(node), lazy)
                for handler in node.handlers:
                    walk(handler.body, optional, lazy)
                walk(node.orelse, optional, lazy)
                walk(node.finalbody, optional, lazy)
            elif isinstance(node, (ast.With, ast.For, ast.While, ast.ClassDef)):
                walk(node.body, optional, lazy)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(node.body, optional, True)

    walk(ast.parse(text, filename=name).body, False, False)
    return edges


# --------------------------------------------------------------------------- #
# The closure
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Policy:
    """``stubs``: stand-ins used whatever the source holds (engine plumbing, not followed);
    ``fallbacks``: stand-ins used only when the real module cannot load; ``forbidden``:
    third-party top-level packages never imported (e.g. torch at the block level)."""

    stubs: Mapping[str, Builder]
    fallbacks: Mapping[str, Builder] = field(default_factory=dict)
    forbidden: frozenset[str] = frozenset()


@dataclass
class Closure:
    """What serves each name: ``real`` (dotted name -> (file, is_package)), ``stubs`` (dotted
    name -> builder) with ``reasons`` (why a stand-in), ``third_party`` (installed top-level
    packages imported), ``chains`` (how each name was first reached)."""

    origin: str
    version: str
    real: dict[str, tuple[SourceFile, bool]] = field(default_factory=dict)
    stubs: dict[str, Builder] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    third_party: set[str] = field(default_factory=set)
    chains: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Missing:
    name: str
    why: str
    chain: tuple[str, ...]


def _targets(edge: Edge, source: Source, stubs: Mapping[str, Builder]
             ) -> Iterator[tuple[str, bool]]:
    """(module, needs_real_init) each edge imports: ``from pkg import sub`` imports the
    submodule (one of the source or a stand-in); a name that is not a submodule needs ``pkg``
    itself executed."""
    if not edge.names:
        yield edge.target, False
        return
    attrs = False
    for name in edge.names:
        full = f"{edge.target}.{name}"
        if name != "*" and (full in stubs or source.has_module(full)):
            yield f"{edge.target}.{name}", False
        else:
            attrs = True
    if attrs:
        yield edge.target, True


def resolve(source: Source, roots: Sequence[str], policy: Policy) -> Closure:
    """The closure of ``roots`` (dotted names under ``source.top``); see the module docstring.

    Raises :class:`ClosureError` for the first name that can be served neither way."""
    top = source.top
    closure = Closure(source.origin, source.version)
    done: dict[tuple[str, bool], _Missing | None] = {}

    def stub(name: str, build: Builder, why: str, chain: tuple[str, ...]) -> None:
        closure.stubs[name] = build
        closure.reasons.setdefault(name, why)
        closure.chains.setdefault(name, chain)

    def visit(name: str, chain: tuple[str, ...], package_init: bool) -> _Missing | None:
        chain = (*chain, name)
        key = (name, package_init)
        if key in done:
            return done[key]
        done[key] = None  # in progress: a cycle is resolved optimistically
        result = _visit(name, chain, package_init)
        done[key] = result
        return result

    def _visit(name: str, chain: tuple[str, ...], package_init: bool) -> _Missing | None:
        if name in policy.stubs:
            stub(name, policy.stubs[name], "engine plumbing (stand-in by policy)", chain)
            return None
        head = name.split(".")[0]
        if head != top:
            why = ("forbidden at this level" if head in policy.forbidden
                   else None if importlib.util.find_spec(head) is not None
                   else "not installed")
            if why is None:
                closure.third_party.add(head)
                return None
            if name in policy.fallbacks:
                stub(name, policy.fallbacks[name], f"{name} is {why} (fallback stand-in)", chain)
                return None
            return _Missing(name, f"third-party package {head} is {why}", chain)
        found = source.module(name)
        if found is None:
            if name in policy.fallbacks:
                stub(name, policy.fallbacks[name], "not in the source (fallback stand-in)",
                     chain)
                return None
            return _Missing(name, "missing from the source (no such module)", chain)
        file, is_package = found
        if is_package and not package_init:
            return None  # a synthetic package serves its submodules
        problem: _Missing | None = None
        for edge in imports_of(file.text, name, is_package):
            for target, needs_init in _targets(edge, source, policy.stubs):
                if not target or target == name:
                    continue
                if edge.lazy:
                    if target in policy.stubs:
                        stub(target, policy.stubs[target], "engine plumbing (stand-in by "
                             "policy; imported lazily)", (*chain, target))
                    continue
                missing = visit(target, chain, needs_init)
                if missing is not None and not edge.optional:
                    problem = missing
                    break
            if problem is not None:
                break
        if problem is not None:
            if name in policy.fallbacks:
                stub(name, policy.fallbacks[name],
                     f"the real module cannot load: {problem.name}: {problem.why} "
                     "(fallback stand-in)", chain)
                return None
            return problem
        closure.real[name] = (file, is_package)
        closure.chains.setdefault(name, chain)
        return None

    for root in roots:
        missing = visit(root, (), True)
        if missing is not None:
            raise ClosureError(source.origin, missing.name, missing.why, missing.chain)
    return closure
