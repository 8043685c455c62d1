"""Load SGLang's real radix caches and token-slot allocators from an sglang wheel, uninstalled.

What runs is upstream's: every module under ``sglang/srt/mem_cache/`` (except
``memory_pool.py``, the GPU pools, served by placeholders), ``sglang/srt/environ.py`` and
``sglang/srt/rust_extensions/`` is read from the wheel and executed under its upstream name;
``sglang`` and ``sglang.srt`` are bare packages, and the rest of the engine comes from
:mod:`properties.families.sglang.stand_ins` (each stand-in documented there, with why it cannot
change what the suite observes). The Rust tree core (``rust_tree_core/mem_cache.*.so``, PyO3,
linked against libtorch) is extracted once to ``<cache>/sglang-<version>-ext/`` and loaded from
there under its upstream name. ``torch`` (the CPU build), ``numpy`` and ``msgspec`` must be
installed; a missing one is an :class:`UpstreamSourceInvalid` naming it.

Loads are isolated: ``sys.modules`` is restored after the import, so releases coexist. Upstream
imports some modules lazily (the tree-core factories); the ``new_*`` constructors therefore run
inside :meth:`SGLangModules.activated`, which puts the load's modules back for the call.
Loads are memoised per (wheel, version).

Supported releases: 0.5.23 (the newest: ``UnifiedRadixCache`` the default, Python and Rust tree
cores) and 0.5.18 (the last with the classic ``RadixCache`` the default; Python core only).
The version is read from the wheel's ``METADATA``. ``python -m properties.upstream fetch sglang
[--version V]`` downloads a wheel into the cache.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import time
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from properties.core.sources import (
    Entry,
    PlanFinder,
    PlanLoader,
    Runner,
    SourceFile,
    UpstreamError,
    UpstreamSourceInvalid,
    UpstreamSourceMissing,
    cache_dir,
    extract_member,
    pip_download,
    read_modules,
    with_packages,
)
from properties.families.sglang import stand_ins

__all__ = [
    "CLASSIC_VERSION",
    "DEFAULT_VERSION",
    "FETCH_COMMAND",
    "INSTALL_COMMAND",
    "SUPPORTED_VERSIONS",
    "SGLangModules",
    "UpstreamCoreUnavailable",
    "cached_wheel",
    "fetch",
    "load_sglang",
    "main",
    "match_length",
    "measure",
    "missing_requirements",
    "unavailable_reason",
]

DEFAULT_VERSION = "0.5.23"
CLASSIC_VERSION = "0.5.18"
SUPPORTED_VERSIONS = (DEFAULT_VERSION, CLASSIC_VERSION)
FETCH_COMMAND = "python -m properties.upstream fetch sglang"
REQUIRED_THIRD_PARTY = ("torch", "numpy", "msgspec")

# Wheel paths (below ``sglang/``) executed from the wheel; memory_pool is a stand-in.
_SERVED = ("srt/mem_cache/", "srt/environ.py", "srt/rust_extensions/",
           "srt/session/streaming_session.py",
           # the SWA allocator's runtime checks (``expect``), upstream's own
           "srt/utils/invariants.py")
_NOT_SERVED = ("srt/mem_cache/memory_pool.py",
               # DeepSeek-V4 HiSparse (GPU kernels): a stand-in, for one isinstance check
               "srt/mem_cache/allocator/hisparse.py",
               # the unified-memory SWA composite: a stand-in, for isinstance checks only
               "srt/mem_cache/allocator/unified_hybrid_swa.py")
_RUST_MODULE = "sglang.srt.mem_cache.rust_tree_core.mem_cache"
_REQUIRED = ("srt.mem_cache.radix_cache", "srt.mem_cache.base_prefix_cache",
             "srt.mem_cache.cache_init_params")


class UpstreamCoreUnavailable(UpstreamError):
    """The wheel loaded, but a requested class or tree core is not in this release (e.g. the
    Rust core before 0.5.21) or cannot run here; the message names it."""


@dataclass(frozen=True)
class SGLangModules:
    """One load. ``modules``: every module the load created, by dotted name; ``rust_core``:
    whether the Rust tree-core extension imported (None when the release has none)."""

    version: str
    origin: str
    modules: Mapping[str, ModuleType]
    stubbed: tuple[str, ...]
    rust_core: bool | None
    rust_error: str | None
    load_seconds: float
    extension_path: Path | None = None
    #: Why the FULL + SWA classes did not import (None: they did, or the release has none).
    swa_error: str | None = None
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False,
                                   compare=False)

    def module(self, name: str) -> ModuleType:
        """``sglang.<name>`` of this load (e.g. ``srt.mem_cache.radix_cache``)."""
        try:
            return self.modules[f"sglang.{name}"]
        except KeyError:
            raise UpstreamCoreUnavailable(
                f"{self.origin}: sglang.{name} is not in {self.version}") from None

    @property
    def radix_cache(self) -> ModuleType:
        return self.module("srt.mem_cache.radix_cache")

    @property
    def base(self) -> ModuleType:
        return self.module("srt.mem_cache.base_prefix_cache")

    @property
    def has_unified(self) -> bool:
        return "sglang.srt.mem_cache.unified_radix_cache" in self.modules

    def allocator_class(self, paged: bool) -> type[Any]:
        name = "PagedTokenToKVPoolAllocator" if paged else "TokenToKVPoolAllocator"
        for mod in ("srt.mem_cache.allocator", "srt.mem_cache.allocator.paged",
                    "srt.mem_cache.allocator.token"):
            found = getattr(self.modules.get(f"sglang.{mod}"), name, None)
            if found is not None:
                return found  # type: ignore[no-any-return]
        raise UpstreamCoreUnavailable(f"{self.origin}: no {name} in {self.version}")

    @contextlib.contextmanager
    def activated(self) -> Iterator[None]:
        """This load's modules registered in ``sys.modules`` for the block (for upstream's
        lazy imports), restored afterwards; the Rust extension stays registered only if it
        was before."""
        with self._lock:
            saved = {n: sys.modules.pop(n) for n in list(sys.modules)
                     if n == "sglang" or n.startswith("sglang.")}
            sys.modules.update(self.modules)
            try:
                yield
            finally:
                for name in [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]:
                    del sys.modules[name]
                sys.modules.update(saved)

    # -- constructors ------------------------------------------------------- #

    def new_allocator(self, size: int, page_size: int = 1, *, need_sort: bool = False) -> Any:
        """``TokenToKVPoolAllocator(size, int64, "cpu", None, need_sort)`` (page size 1) or
        ``PagedTokenToKVPoolAllocator(size, page_size, ...)``; slot 0 / page 0 is reserved."""
        import torch

        with self.activated():
            if page_size == 1:
                return self.allocator_class(False)(size, torch.int64, "cpu", None, need_sort)
            return self.allocator_class(True)(size, page_size, torch.int64, "cpu", None,
                                              need_sort)

    def _params(self, allocator: Any, page_size: int, req_to_token_pool: Any = None,
                **extra: Any) -> Any:
        params_cls = self.module("srt.mem_cache.cache_init_params").CacheInitParams
        return params_cls(disable=False, req_to_token_pool=req_to_token_pool,
                          token_to_kv_pool_allocator=allocator, page_size=page_size, **extra)

    def new_radix_cache(self, allocator: Any, page_size: int = 1,
                        req_to_token_pool: Any = None) -> Any:
        """The classic ``RadixCache`` over ``allocator`` (without a request pool: tree-level
        calls only)."""
        with self.activated():
            return self.radix_cache.RadixCache(self._params(allocator, page_size,
                                                            req_to_token_pool))

    def new_unified(self, allocator: Any, page_size: int = 1, core: str = "python",
                    req_to_token_pool: Any = None) -> Any:
        """``UnifiedRadixCache`` with the FULL component only and tree core ``core``
        ("python" or "rust") (without a request pool: tree-level calls only). Raises
        UpstreamCoreUnavailable when the release has no such core or upstream fell back to
        another one."""
        if not self.has_unified:
            raise UpstreamCoreUnavailable(f"{self.version} has no UnifiedRadixCache")
        if core == "rust" and not self.rust_core:
            raise UpstreamCoreUnavailable(
                f"{self.version}: the Rust tree core is unavailable: "
                f"{self.rust_error or 'the wheel has no rust_tree_core extension'}")
        component = self.module("srt.mem_cache.unified_cache.component_type").ComponentType
        unified = self.module("srt.mem_cache.unified_radix_cache").UnifiedRadixCache
        extra: dict[str, Any] = {"tree_components": (component.FULL,)}
        if "tree_core_backend" in self._param_fields():
            extra["tree_core_backend"] = core
        elif core != "python":
            raise UpstreamCoreUnavailable(f"{self.version} has no selectable tree core")
        with self.activated():
            cache = unified(self._params(allocator, page_size, req_to_token_pool, **extra))
        found = type(getattr(cache, "tree_core", None)).__name__
        if core == "rust" and "Rust" not in found:
            raise UpstreamCoreUnavailable(f"{self.version}: asked for the Rust core, got {found}")
        return cache

    def _param_fields(self) -> set[str]:
        import dataclasses

        params_cls = self.module("srt.mem_cache.cache_init_params").CacheInitParams
        return {f.name for f in dataclasses.fields(params_cls)}


# --------------------------------------------------------------------------- #
# Sources
# --------------------------------------------------------------------------- #


def cached_wheel(version: str = DEFAULT_VERSION) -> Path | None:
    """The cached wheel of ``version``, if fetched."""
    found = sorted(cache_dir().glob(f"sglang-{version}-*.whl"))
    return found[0] if found else None


def _default_source(version: str) -> Path:
    wheel = cached_wheel(version)
    if wheel is None:
        raise UpstreamSourceMissing(
            f"no sglang {version} wheel: run `{FETCH_COMMAND} --version {version}` "
            f"(downloads it to {cache_dir()})")
    return wheel


def fetch(version: str = DEFAULT_VERSION, dest: Path | None = None,
          runner: Runner | None = None) -> Path:
    """Download the sglang ``version`` wheel (no dependencies) into ``dest`` (default: the
    cache). The wheels are cp311 manylinux builds: pip picks the one for this interpreter."""
    return pip_download(f"sglang=={version}", cache_dir() if dest is None else dest,
                        f"sglang-{version}-*.whl", ("--only-binary", ":all:"), runner)


def _wheel_plan(source: Path) -> tuple[dict[str, bool], list[str], str | None]:
    """(module -> required for read_modules, package names, the Rust .so member or None)."""
    try:
        with zipfile.ZipFile(source) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile) as exc:
        raise UpstreamSourceInvalid(f"{source}: not a readable wheel: {exc}") from exc
    modules: dict[str, bool] = {}
    packages: list[str] = []
    so: str | None = None
    for member in names:
        rel = member.removeprefix("sglang/")
        if rel == member or not rel.startswith(_SERVED) or rel in _NOT_SERVED:
            continue
        if rel.endswith(".so") and rel.startswith("srt/mem_cache/rust_tree_core/mem_cache."):
            so = member
        if not rel.endswith(".py"):
            continue
        dotted = rel[:-3].replace("/", ".")
        if dotted.endswith(".__init__"):
            packages.append(dotted.removesuffix(".__init__"))
        modules[dotted] = dotted in _REQUIRED
    absent = [f"sglang/{rel.replace('.', '/')}.py" for rel in _REQUIRED if rel not in modules]
    if absent:
        raise UpstreamSourceInvalid(f"{source}: no {', '.join(absent)} (not an sglang release "
                                    "with the radix caches)")
    return modules, packages, so


def _extract(source: Path, member: str, version: str) -> Path:
    """The Rust extension extracted to ``<cache>/sglang-<version>-ext/`` (kept if present
    with the same size)."""
    with zipfile.ZipFile(source) as archive:
        return extract_member(archive, member, cache_dir() / f"sglang-{version}-ext")


class _ExtensionFinder(importlib.abc.MetaPathFinder):
    """Serves the Rust tree-core extension from its extracted file, under its upstream name."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _RUST_MODULE:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(self._path))
        return importlib.util.spec_from_file_location(fullname, str(self._path), loader=loader)


INSTALL_COMMAND = "pip install -e '.[sglang]'"


def missing_requirements() -> list[str]:
    """The third-party packages upstream's caches need that are not installed."""
    return [name for name in REQUIRED_THIRD_PARTY if importlib.util.find_spec(name) is None]


def unavailable_reason(version: str = DEFAULT_VERSION) -> str | None:
    """Why ``version`` cannot be loaded here (no wheel, or missing packages), with the command
    that fixes it; None when it can. For test skips."""
    if cached_wheel(version) is None:
        return f"no sglang {version} wheel cached: run `{FETCH_COMMAND} --version {version}`"
    missing = missing_requirements()
    if missing:
        return f"sglang's caches need {', '.join(missing)}: run `{INSTALL_COMMAND}`"
    return None


def _check_third_party() -> None:
    missing = missing_requirements()
    if missing:
        raise UpstreamSourceInvalid(
            f"sglang's caches need {', '.join(missing)} installed (the CPU torch build: "
            f"`{INSTALL_COMMAND}`)")


def _plan(files: Mapping[str, SourceFile], packages: Sequence[str]) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    package_set = set(packages)
    for rel, file in files.items():
        if rel.endswith(".__init__"):
            name = rel.removesuffix(".__init__")
            entries[f"sglang.{name}"] = Entry(True, file=file)
        else:
            entries[f"sglang.{rel}"] = Entry(rel in package_set, file=file)
    missing = lambda top: importlib.util.find_spec(top) is None  # noqa: E731
    for name, build in stand_ins.stubs(missing).items():
        entries.setdefault(name, Entry(name.startswith("sgl_kernel") and "." not in name,
                                       stub=build))
    # Stand-in modules that have submodules (third-party packages) must be packages.
    for name in list(entries):
        parent = name.rpartition(".")[0]
        if parent in entries and not entries[parent].package:
            entries[parent] = Entry(True, stub=entries[parent].stub, file=entries[parent].file)
    return with_packages(entries)


_TARGETS = ("srt.mem_cache.radix_cache", "srt.mem_cache.allocator",
            "srt.mem_cache.unified_radix_cache",
            "srt.mem_cache.unified_cache.unified_tree_core",
            "srt.mem_cache.unified_cache.tree_core_registry")
_RUST_TARGETS = ("srt.mem_cache.rust_tree_core.adapter",)
#: FULL + SWA: the allocator (a failure kept in ``swa_error``), then what the SWA trees import
#: lazily: 0.5.18's SWARadixCache, 0.5.23's Unified SWA component and the allocators it
#: checks for; each imported where the wheel has it (a tree that needs a missing one fails
#: to build, naming it).
_SWA_TARGETS = ("srt.mem_cache.allocator.swa", "srt.mem_cache.allocator.hisparse",
                "srt.mem_cache.allocator.unified_hybrid_swa",
                "srt.mem_cache.swa_radix_cache",
                "srt.mem_cache.unified_cache.components.swa")

_LOCK = threading.RLock()
_LOADED: dict[tuple[str, str], SGLangModules] = {}


def _load(source: Path) -> SGLangModules:
    started = time.perf_counter()
    module_map, packages, so = _wheel_plan(source)  # a bad source is named first
    _check_third_party()
    read = read_modules(source, "sglang", module_map)
    version = read.version.split()[-1]
    entries = _plan(read.files, packages)
    loader = PlanLoader(entries, read.origin)
    finders: list[importlib.abc.MetaPathFinder] = [PlanFinder(entries, loader)]
    ext_path = _extract(source, so, version) if so is not None else None
    if ext_path is not None:
        finders.append(_ExtensionFinder(ext_path))
    tops = {name.split(".")[0] for name in entries}
    saved = {n: sys.modules.pop(n) for n in list(sys.modules) if n.split(".")[0] in tops}
    for finder in reversed(finders):
        sys.meta_path.insert(0, finder)
    rust_core: bool | None = None
    rust_error: str | None = None
    try:
        for rel in _TARGETS:
            full = f"sglang.{rel}"
            if full in entries or rel in _REQUIRED:
                _import(full, read.origin)
        if "sglang.srt.mem_cache.rust_tree_core.adapter" in entries:
            try:
                for rel in _RUST_TARGETS:
                    _import(f"sglang.{rel}", read.origin)
                rust_core = True
            except UpstreamSourceInvalid as exc:
                rust_core, rust_error = False, str(exc)
        swa_error: str | None = None
        for rel in _SWA_TARGETS:
            if f"sglang.{rel}" in entries:
                try:
                    _import(f"sglang.{rel}", read.origin)
                except UpstreamError as exc:  # the allocator is every SWA tree's
                    if rel == _SWA_TARGETS[0]:
                        swa_error = str(exc)
        modules = {n: m for n, m in sys.modules.items()
                   if n.split(".")[0] == "sglang" and m is not None}
    finally:
        for finder in finders:
            sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.split(".")[0] in tops]:
            del sys.modules[name]
        sys.modules.update(saved)
    return SGLangModules(version=version, origin=read.origin, modules=modules,
                         stubbed=tuple(sorted(set(loader.stubbed))), rust_core=rust_core,
                         rust_error=rust_error, load_seconds=time.perf_counter() - started,
                         extension_path=ext_path, swa_error=swa_error)


def _import(name: str, origin: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise UpstreamSourceInvalid(
            f"{origin}: loading {name} failed: {exc} (neither a wheel module nor a stand-in)"
        ) from exc
    except Exception as exc:  # upstream code (or a stand-in's AttributeError) raised
        raise UpstreamSourceInvalid(
            f"{origin}: executing {name} raised {type(exc).__name__}: {exc}") from exc


def load_sglang(source: str | os.PathLike[str] | None = None, *,
                version: str = DEFAULT_VERSION) -> SGLangModules:
    """Load a release's cache and allocator modules (see the module docstring); memoised."""
    with _LOCK:
        path = Path(source).expanduser() if source is not None else _default_source(version)
        key = (str(path.resolve()), version)
        if key not in _LOADED:
            _LOADED[key] = _load(path)
        return _LOADED[key]


# --------------------------------------------------------------------------- #
# Measuring what loads
# --------------------------------------------------------------------------- #


def _smoke(mods: SGLangModules, what: str) -> None:
    """Build ``what`` and drive one insert / match / lock / evict (or alloc / free)."""
    from array import array

    import torch

    base = mods.base
    key_cls = mods.radix_cache.RadixKey
    if what in ("TokenToKVPoolAllocator", "PagedTokenToKVPoolAllocator"):
        page = 1 if what == "TokenToKVPoolAllocator" else 4
        alloc = mods.new_allocator(16, page)
        got = alloc.alloc(8)
        alloc.free(got)
        if alloc.available_size() != 16:
            raise UpstreamSourceInvalid(f"{what}: available_size {alloc.available_size()}")
        return
    alloc = mods.new_allocator(64, 1)
    if what == "RadixCache":
        cache = mods.new_radix_cache(alloc)
    else:
        cache = mods.new_unified(alloc, core=what.split(":")[1])
    slots = alloc.alloc(4)
    cache.insert(base.InsertParams(key=key_cls(array("q", [1, 2, 3, 4])), value=slots))
    match = cache.match_prefix(base.MatchPrefixParams(key=key_cls(array("q", [1, 2, 9]))))
    if match_length(match) != 2:
        raise UpstreamSourceInvalid(f"{what}: matched {match_length(match)}, not 2")
    cache.evict(base.EvictParams(num_tokens=4))
    _ = torch


def match_length(result: Any) -> int:
    """A ``MatchResult``'s device prefix length: ``device_prefix_len`` (0.5.22 on) or the
    length of ``device_indices`` (a tensor, before)."""
    if hasattr(result, "device_prefix_len"):
        return int(result.device_prefix_len)
    return len(result.device_indices)


def read_match(result: Any, cache: Any) -> tuple[int, Any, list[int]]:
    """(matched length, node handle, the matched tokens' slots) of ``cache``'s
    ``MatchResult``: its ``device_indices`` where it carries them, else the node's path
    (``path_device_indices``)."""
    length = match_length(result)
    node = result.last_device_node
    if hasattr(result, "device_indices"):
        slots = result.device_indices.tolist()
    else:
        slots = cache.path_device_indices(node).tolist()
    return length, node, [int(s) for s in slots[:length]]


def measure(versions: Sequence[str] = SUPPORTED_VERSIONS) -> list[tuple[str, str, str, float]]:
    """(version, what, "ok" or the error, seconds) for each cached release's load, each class
    and each tree core: what the loader can run here and how long it takes."""
    rows: list[tuple[str, str, str, float]] = []
    for version in versions:
        if cached_wheel(version) is None:
            rows.append((version, "wheel", f"absent: {FETCH_COMMAND} --version {version}", 0.0))
            continue
        try:
            mods = load_sglang(version=version)
        except UpstreamError as exc:
            rows.append((version, "load", str(exc), 0.0))
            continue
        rows.append((version, "load", "ok", mods.load_seconds))
        for what in ("TokenToKVPoolAllocator", "PagedTokenToKVPoolAllocator", "RadixCache",
                     "UnifiedRadixCache:python", "UnifiedRadixCache:rust"):
            started = time.perf_counter()
            try:
                _smoke(mods, what)
                status = "ok"
            except Exception as exc:  # reported in the table, not hidden
                status = f"{type(exc).__name__}: {exc}"
            rows.append((version, what, status, time.perf_counter() - started))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``fetch`` downloads a release's wheel; ``info`` loads each cached release and
    reports what runs (each class, each tree core) and how long it took."""
    parser = argparse.ArgumentParser(prog="python -m properties.upstream {fetch,info} sglang")
    commands = parser.add_subparsers(dest="command", required=True)
    fetch_cmd = commands.add_parser("fetch")
    fetch_cmd.add_argument("--version", choices=SUPPORTED_VERSIONS, default=DEFAULT_VERSION)
    fetch_cmd.add_argument("--dest", type=Path, default=None)
    info = commands.add_parser("info")
    info.add_argument("--version", choices=SUPPORTED_VERSIONS, default=None)
    args = parser.parse_args(argv)
    if args.command == "fetch":
        try:
            print(fetch(args.version, args.dest))
        except UpstreamError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    versions = SUPPORTED_VERSIONS if args.version is None else (args.version,)
    failed = False
    for version, what, status, seconds in measure(versions):
        failed |= status != "ok" and what in ("load", "RadixCache")
        print(f"{version:8} {what:30} {seconds * 1000:8.1f} ms  {status}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
