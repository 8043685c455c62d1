"""Patched copies of the bundled v1 pool (``prefixcache/v1/core/``: ``kv_cache_utils.py`` and
``block_pool.py``) with textual patches: :class:`tests.zoo.patching.Patch`, applied by
:func:`tests.zoo.patching.apply`, so a stale patch fails loudly as in the v0 zoo.

A copy of variant ``name`` is the package ``prefixcache_zoo_v1.<name>``: both core modules are
re-executed from the (patched) source with their imports of each other redirected into the copy;
errors, events and hashing stay the bundled modules, so a copy raises the bundled error classes.
A patch's ``module`` is ``"v1.core.block_pool"`` or ``"v1.core.kv_cache_utils"``.
"""

from __future__ import annotations

import ast
import dataclasses
import linecache
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from types import ModuleType

import prefixcache.v1
from properties.families.v1 import targets
from tests.zoo.patching import Patch, PatchError, apply

ROOT = "prefixcache_zoo_v1"
_CORE = "prefixcache.v1.core"
#: Executed in this order (block_pool imports kv_cache_utils).
MODULES = ("kv_cache_utils", "block_pool")
_SOURCE = Path(prefixcache.v1.__file__).resolve().parent / "core"


class _Redirect(ast.NodeTransformer):
    def __init__(self, copy: str) -> None:
        self.copy = copy

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        module = node.module or ""
        if node.level == 0 and module.startswith(_CORE + "."):
            node.module = self.copy + module[len(_CORE):]
        return node


def _build(name: str, patches: tuple[Patch, ...]) -> ModuleType:
    wanted = {f"v1.core.{m}" for m in MODULES}
    unknown = {p.module for p in patches} - wanted
    if unknown or not patches:
        raise PatchError(f"zoo variant {name!r}: patches must name {sorted(wanted)}, "
                         f"got {sorted(unknown) or 'none'}")
    package = ModuleType(f"{ROOT}.{name}")
    package.__path__ = []
    sys.modules.setdefault(ROOT, ModuleType(ROOT))
    sys.modules[package.__name__] = package
    for module in MODULES:
        source = (_SOURCE / f"{module}.py").read_text()
        for patch in patches:
            if patch.module == f"v1.core.{module}":
                source = apply(source, patch, name)
        filename = f"<{ROOT}.{name}>/prefixcache/v1/core/{module}.py"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        tree = _Redirect(package.__name__).visit(ast.parse(source, filename))
        mod = ModuleType(f"{package.__name__}.{module}")
        mod.__file__ = filename
        sys.modules[mod.__name__] = mod
        setattr(package, module, mod)
        exec(compile(tree, filename, "exec"), mod.__dict__)
    return package


@cache
def _package(name: str, patches: tuple[Patch, ...]) -> ModuleType:
    return _build(name, patches)


def _claimed(target: targets.PoolTarget, name: str) -> targets.PoolTarget:
    """``target`` with the bundled package's claims (typed errors, failure atomicity)."""
    claims = prefixcache.v1.PREFIXCACHE_CLAIMS
    return dataclasses.replace(
        target, name=name, version="mutant" if name.startswith("zoo/") else target.version,
        misuse_types=tuple(claims["misuse_errors"]) if claims.get("typed_errors") else (),
        atomic=bool(claims.get("atomic")))


def patched_bundled_pool(name: str, patches: Sequence[Patch]) -> targets.PoolTarget:
    """The bundled pool with ``patches`` applied (built once per name), as a target claiming
    what the bundled package claims, named ``zoo/<name>``."""
    package = _package(name, tuple(patches))
    return _claimed(targets.load(f"{package.__name__}.block_pool:BlockPool"), f"zoo/{name}")


def bundled_pool() -> targets.PoolTarget:
    """The unpatched bundled pool with the bundled package's claims (the zoo's baseline)."""
    return _claimed(targets.load(targets.DEFAULT_SPEC), "prefixcache")
