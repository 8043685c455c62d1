"""Mutants as patches: a broken allocator is the reference package with a few lines changed.

A :class:`Patch` names a module of ``prefixcache/``, an optional scope in it (a function,
class or method by qualified name), the text to find there and the text to put instead. A
mutant's patches are applied to a copy of the package's source when the copy is first
imported, as mutation tools do; nothing of ``prefixcache/`` is copied into the zoo by hand.

The copy of mutant ``name`` is the package ``prefixcache_zoo.<name>`` (built on first import
by a finder on ``sys.meta_path``, so a reproducer or a forked search process imports it by
name). Only the patched modules, ``cpu_gpu_block_allocator`` (whose class the factory builds: a
suite finds the block table, trackers and hashing through its package) and the modules that
import them (directly or through others) are re-executed from the patched source, with their
``prefixcache`` imports pointed at the copy; every other module is the bundled one itself
(same errors, same ``Device``, unless a patch changes them), so classes stay consistent
inside the copy.

Contract: a patch applies only where its ``find`` text occurs exactly once in its scope; an
absent or ambiguous text, an unknown scope or module, or a patch that changes nothing raises
:class:`PatchError` naming the mutant, the place and the count, when the copy is built.

Matching: ``find`` and ``replace`` may span lines. The first line matches anywhere in a line;
every later line of ``find`` must equal the source line with the first line's indentation
prepended (the last one need only start so), and every later line of ``replace`` gets that
indentation too. So patches are written without the method's indentation.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

#: The package the copies live in: ``prefixcache_zoo.<mutant>.<module>``.
ROOT = "prefixcache_zoo"
REFERENCE = "prefixcache"
# The copies log what the reference logs (a refused prefix-cache reset, hundreds per zoo
# search) under ``prefixcache_zoo.*``, outside the ``prefixcache`` logger that the searches'
# ``quiet()`` silences; a mutant is judged by its violations, never by its log.
logging.getLogger(ROOT).setLevel(logging.ERROR)
_SOURCE = Path(__file__).resolve().parents[2] / REFERENCE


class PatchError(Exception):
    """A patch that does not apply to the reference source as it is now."""


@dataclass(frozen=True, slots=True)
class Patch:
    """Replace the one occurrence of ``find`` in ``scope`` of ``prefixcache/<module>.py``.

    ``scope`` is a qualified name (``"PrefixCachingBlockAllocator._release"``) or ``""`` for
    the whole module."""

    module: str
    scope: str
    find: str
    replace: str


#: Mutant name -> its patches; filled by :func:`register` (the zoo registry does it).
_REGISTRY: dict[str, tuple[Patch, ...]] = {}


def register(name: str, patches: Sequence[Patch]) -> None:
    """Make ``prefixcache_zoo.<name>`` importable as the reference patched by ``patches``."""
    if not name.isidentifier():
        raise PatchError(f"zoo mutant name {name!r} is not an identifier")
    if not patches:
        raise PatchError(f"zoo mutant {name!r} has no patch")
    known = _REGISTRY.get(name)
    if known is not None and known != tuple(patches):
        raise PatchError(f"zoo mutant {name!r} is registered twice with different patches")
    _REGISTRY[name] = tuple(patches)
    _install()


def package(name: str) -> ModuleType:
    """The patched copy of the reference package for mutant ``name`` (built once)."""
    return importlib.import_module(f"{ROOT}.{name}")


def factory(name: str, module: str) -> Callable[..., Any]:
    """``CpuGpuBlockAllocator.create`` of mutant ``name``'s copy, named ``name`` and placed in
    ``module`` (whose ``prefixcache_claims`` hook the suite reads)."""

    def create(allocator_type: str, num_gpu_blocks: int, num_cpu_blocks: int, block_size: int,
               hash_function: Callable[..., int] | None = None) -> Any:
        return package(name).CpuGpuBlockAllocator.create(
            allocator_type, num_gpu_blocks, num_cpu_blocks, block_size, hash_function)

    create.__name__ = create.__qualname__ = name
    create.__module__ = module
    return create


def claims(name: str) -> dict[str, Any]:
    """What mutant ``name`` claims: what its copy of the package claims (the bundled claims,
    with the copy's error classes), under its own name."""
    copy: Any = package(name)
    return {**copy.PREFIXCACHE_CLAIMS, "name": f"zoo/{name}", "version": "mutant"}


# --------------------------------------------------------------------------- applying


def _scope_span(tree: ast.Module, scope: str) -> tuple[int, int] | None:
    """First and last line (1-based) of the definition named by ``scope``."""
    body: list[ast.stmt] = tree.body
    node: ast.stmt | None = None
    for part in scope.split("."):
        node = next((n for n in body if isinstance(
            n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    if node is None or node.end_lineno is None:
        return None
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
    return first, node.end_lineno


def _matches(lines: list[str], start: int, stop: int, find: list[str]) -> list[tuple[int, int]]:
    """(line, column) of every match of ``find`` within ``lines[start:stop]``."""
    found: list[tuple[int, int]] = []
    for index in range(start, stop):
        line = lines[index]
        indent = line[:len(line) - len(line.lstrip())]
        column = line.find(find[0])
        while column != -1:
            rest = find[1:]
            if index + len(rest) < stop and all(
                    lines[index + 1 + k] == indent + text for k, text in enumerate(rest[:-1])
            ) and (not rest or lines[index + len(rest)].startswith(indent + rest[-1])):
                found.append((index, column))
            column = line.find(find[0], column + 1)
    return found


def apply(source: str, patch: Patch, mutant: str) -> str:
    """``source`` (of ``prefixcache/<patch.module>.py``) with ``patch`` applied."""
    where = f"zoo mutant {mutant!r}: patch of {REFERENCE}/{patch.module}.py" + (
        f" in {patch.scope}" if patch.scope else "")
    if not patch.find or patch.find == patch.replace:
        raise PatchError(f"{where}: the patch finds nothing or changes nothing")
    lines = source.split("\n")
    start, stop = 0, len(lines)
    if patch.scope:
        span = _scope_span(ast.parse(source), patch.scope)
        if span is None:
            raise PatchError(f"{where}: the module has no {patch.scope!r} (renamed or moved?)")
        start, stop = span[0] - 1, span[1]
    find = patch.find.split("\n")
    found = _matches(lines, start, stop, find)
    if len(found) != 1:
        raise PatchError(f"{where}: {patch.find!r} occurs {len(found)} times, not once; the "
                         "reference code changed: update the patch")
    index, column = found[0]
    line = lines[index]
    indent = line[:len(line) - len(line.lstrip())]
    new = patch.replace.split("\n")
    tail = lines[index + len(find) - 1][len(indent + find[-1]) if len(find) > 1
                                        else column + len(find[0]):]
    replaced = [line[:column] + new[0]] + [indent + text if text else "" for text in new[1:]]
    replaced[-1] += tail
    return "\n".join(lines[:index] + replaced + lines[index + len(find):])


# --------------------------------------------------------------------------- the copy


@cache
def _reference_imports() -> Mapping[str, frozenset[str]]:
    """Module -> the reference modules it imports (anywhere in it, type-only too)."""
    graph: dict[str, frozenset[str]] = {}
    for path in sorted(_SOURCE.glob("*.py")):
        tree = ast.parse(path.read_text())
        graph[path.stem] = frozenset(
            node.module.partition(".")[2] or "__init__" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module is not None
            and node.level == 0 and node.module.partition(".")[0] == REFERENCE)
    return graph


#: Always re-executed: the factory's allocator class must be the copy's, since a suite finds
#: the other parts (block table, trackers, hashing) through the package of its class.
_ENTRY = "cpu_gpu_block_allocator"


def _dirty(patches: Sequence[Patch]) -> frozenset[str]:
    """The patched modules, the entry module, and every module importing one of them,
    transitively."""
    graph = _reference_imports()
    dirty = {p.module for p in patches}
    unknown = dirty - set(graph)
    if unknown:
        raise PatchError(f"no module {sorted(unknown)} in {REFERENCE}/")
    dirty.add(_ENTRY)
    while True:
        more = {m for m, imports in graph.items() if imports & dirty} - dirty
        if not more:
            return frozenset(dirty | {"__init__"})
        dirty |= more


def _reference_froms(tree: ast.Module) -> tuple[tuple[ast.ImportFrom, str], ...]:
    """Every ``from prefixcache.x import y`` of ``tree`` (anywhere in it), with its module."""
    return tuple((node, node.module) for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module is not None
                 and node.level == 0 and node.module.partition(".")[0] == REFERENCE)


#: The copy's package name in the shared compilation of an unpatched module (see
#: :func:`_reference_code`), replaced by the mutant's in its names.
_PLACEHOLDER = f"{ROOT}.__mutant__"


@cache
def _reference_code(module: str) -> CodeType:
    """The unpatched source of ``prefixcache/<module>.py``, compiled once with its imports of
    the reference redirected to :data:`_PLACEHOLDER`: most modules of a copy are unpatched (they
    only import a patched one), and compiling them once, not once per mutant, is most of
    :func:`precompile`'s time."""
    tree = ast.parse((_SOURCE / f"{module}.py").read_text())
    for node, name in _reference_froms(tree):
        node.module = _PLACEHOLDER + name[len(REFERENCE):]
    return compile(tree, f"<{_PLACEHOLDER}>/{REFERENCE}/{module}.py", "exec")


def _renamed(code: CodeType, copy: str, filename: str) -> CodeType:
    """``code`` (and the code it holds) with :data:`_PLACEHOLDER` in its imported module names
    replaced by ``copy``, and ``filename`` as its file: the code compiling the redirected source
    under ``filename`` gives. (A name holding a dot can only be an imported module's.)"""
    names = tuple(copy + name[len(_PLACEHOLDER):]
                  if name == _PLACEHOLDER or name.startswith(_PLACEHOLDER + ".") else name
                  for name in code.co_names)
    consts = tuple(_renamed(const, copy, filename) if isinstance(const, CodeType) else const
                   for const in code.co_consts)
    return code.replace(co_names=names, co_consts=consts, co_filename=filename)


@cache
def _code(mutant: str, module: str) -> CodeType:
    """The compiled, patched and redirected source of one module of the copy (``from
    prefixcache.x import y`` becomes ``from prefixcache_zoo.<mutant>.x import y``)."""
    path = _SOURCE / f"{module}.py"
    source = path.read_text()
    patches = [patch for patch in _REGISTRY[mutant] if patch.module == module]
    for patch in patches:
        source = apply(source, patch, mutant)
    filename = f"<{ROOT}.{mutant}>/{REFERENCE}/{module}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    copy = f"{ROOT}.{mutant}"
    if not patches:
        return _renamed(_reference_code(module), copy, filename)
    tree = ast.parse(source, filename)
    for node, name in _reference_froms(tree):
        node.module = copy + name[len(REFERENCE):]
    return compile(tree, filename, "exec")


def precompile(mutants: Sequence[str] | None = None) -> None:
    """Apply and compile every registered mutant's patches now (raises :class:`PatchError`
    for any that does not apply); later imports of the copies reuse the code."""
    for mutant in _REGISTRY if mutants is None else mutants:
        for module in _dirty(_REGISTRY[mutant]):
            _code(mutant, module)


class _Loader(importlib.abc.Loader):
    def __init__(self, mutant: str | None, module: str) -> None:
        self.mutant = mutant
        self.module = module

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        if self.mutant is None:  # the root namespace
            return
        if self.module == "__init__":
            # The modules no patch reaches are the reference's own, under the copy's names.
            for name in sorted(set(_reference_imports()) - _dirty(_REGISTRY[self.mutant])):
                reference = importlib.import_module(f"{REFERENCE}.{name}")
                sys.modules[f"{module.__name__}.{name}"] = reference
                setattr(module, name, reference)
        exec(_code(self.mutant, self.module), module.__dict__)  # the patched reference


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``prefixcache_zoo``, ``prefixcache_zoo.<mutant>`` and its patched modules."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if parts[0] != ROOT or len(parts) > 3:
            return None
        if len(parts) == 1:
            return importlib.util.spec_from_loader(fullname, _Loader(None, ""), is_package=True)
        mutant = parts[1]
        if mutant not in _REGISTRY:
            return None
        if len(parts) == 2:
            return importlib.util.spec_from_loader(fullname, _Loader(mutant, "__init__"),
                                                   is_package=True)
        if parts[2] not in _dirty(_REGISTRY[mutant]):
            return None  # the package's __init__ aliased it already
        return importlib.util.spec_from_loader(fullname, _Loader(mutant, parts[2]))


_FINDER = _Finder()


def _install() -> None:
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
