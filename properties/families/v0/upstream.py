"""Load the real upstream block allocators (vLLM v0, Aphrodite) without their engines.

The upstream block modules (``interfaces``, ``common``, ``naive_block``,
``prefix_caching_block``, ``cpu_gpu_block_allocator``, ``block_table``, the
optional block ``utils`` and the evictor) are executed from an upstream source
tree or a wheel/zip at run time, under their original module names
(``vllm.core.block.prefix_caching_block``, ...). Nothing upstream is copied into
this repository. The engine-level names those modules import (``Device``,
``cdiv``, ``chunk_list``, ``init_logger``, ``current_platform``, the sequence
types, two error strings) come from small stubs written here; the engine's heavy
runtime (torch and friends) is never imported.

Isolation contract:

* If no real package of the upstream top-level name (``vllm`` / ``aphrodite``) is
  importable, the first load *registers* its modules in ``sys.modules``, so that
  ``import vllm.core.block.interfaces`` anywhere returns them.
* If a real package is installed (or another source already owns the names), a
  load from an explicit source is *isolated*: the modules are executed under
  their upstream names, then ``sys.modules`` is restored exactly as it was.
* With no explicit source and a real package that ships the block modules, the
  real modules are used as they are.
* Loading is idempotent: the same source always yields the same module objects.

Source lookup when ``source`` is None: ``$PREFIXCACHE_VLLM_SOURCE`` (resp.
``$PREFIXCACHE_APHRODITE_SOURCE``), else an installed real package, else (vLLM
only) an installed ``vllm_block`` distribution, else the cached wheel
``$XDG_CACHE_HOME/prefixcache/vllm_block-0.1.0-py2.py3-none-any.whl`` which
``python -m properties.upstream fetch`` downloads. For Aphrodite the cached artifact is
the ``aphrodite-engine==0.6.5`` wheel (``python -m properties.upstream fetch
aphrodite``): the last release that ships ``aphrodite/processing/block/`` (0.10.0 and later ship the
v1 engine only). It is read as a zip source; the engine is never installed.
"""

from __future__ import annotations

import argparse
import enum
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import logging
import os
import re
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any, Protocol

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
    is_ours,
    parse_metadata,
    pip_download,
    version_assignment,
    with_packages,
)

__all__ = [
    "APHRODITE_FETCH_COMMAND",
    "APHRODITE_REQUIREMENT",
    "APHRODITE_WHEEL",
    "FETCH_COMMAND",
    "VLLM_BLOCK_REQUIREMENT",
    "VLLM_BLOCK_WHEEL",
    "UpstreamError",
    "UpstreamModules",
    "UpstreamSourceInvalid",
    "UpstreamSourceMissing",
    "aphrodite_allocator",
    "cache_dir",
    "cached_aphrodite_wheel",
    "cached_vllm_wheel",
    "fetch_aphrodite",
    "fetch_vllm_block",
    "load_aphrodite",
    "load_vllm_v0",
    "vllm_v0_allocator",
]

VLLM_BLOCK_REQUIREMENT = "vllm-block==0.1.0"
VLLM_BLOCK_WHEEL = "vllm_block-0.1.0-py2.py3-none-any.whl"
FETCH_COMMAND = "python -m properties.upstream fetch"
# The last aphrodite-engine release whose wheel ships aphrodite/processing/block/ (the v0 block
# manager): 0.10.0 onwards are v1-engine wheels without it. One binary wheel (cp38-abi3,
# manylinux1 x86_64, ~232 MB); only its pure-Python block modules are read.
APHRODITE_REQUIREMENT = "aphrodite-engine==0.6.5"
APHRODITE_WHEEL = "aphrodite_engine-0.6.5-cp38-abi3-manylinux1_x86_64.whl"
APHRODITE_FETCH_COMMAND = "python -m properties.upstream fetch aphrodite"
VLLM_SOURCE_ENV = "PREFIXCACHE_VLLM_SOURCE"
APHRODITE_SOURCE_ENV = "PREFIXCACHE_APHRODITE_SOURCE"

@dataclass(frozen=True)
class UpstreamModules:
    """The upstream block modules of one load.

    ``utils`` provides ``Device``/``cdiv``/``chunk_list`` (the engine stub, or the
    real engine module); ``block_utils`` is the block package's own ``utils``
    module when the source ships one. ``registered`` tells whether the modules
    are the ones ``sys.modules`` holds under their upstream names; ``stubbed``
    lists the engine modules that were replaced by stubs (empty for a real
    installed package).
    """

    interfaces: ModuleType
    common: ModuleType
    naive_block: ModuleType
    prefix_caching_block: ModuleType
    cpu_gpu_block_allocator: ModuleType
    block_table: ModuleType
    evictor: ModuleType
    utils: ModuleType
    block_utils: ModuleType | None
    version: str
    origin: str
    registered: bool
    stubbed: tuple[str, ...] = field(default=())


# --------------------------------------------------------------------------- #
# Engine stubs. Each builder fills a fresh module object; they mirror the
# upstream behaviour the block modules rely on, nothing more.
# --------------------------------------------------------------------------- #


def _cdiv(a: int, b: int) -> int:
    """Ceiling division, exact for ints (no float rounding)."""
    return -(a // -b)


def _chunk_list(lst: list[Any], chunk_size: int) -> Iterator[list[Any]]:
    """Yield consecutive slices of ``lst`` of length ``chunk_size`` (the last may be shorter)."""
    for start in range(0, len(lst), chunk_size):
        yield lst[start : start + chunk_size]


class _HostPlatform:
    """Stand-in for ``current_platform``: a plain CPU host.

    ``is_hpu()`` is False, so ``CpuGpuBlockAllocator.create`` reserves no block.
    """

    device_name = "cpu"
    device_type = "cpu"

    def is_cuda(self) -> bool:
        return False

    def is_cuda_alike(self) -> bool:
        return False

    def is_rocm(self) -> bool:
        return False

    def is_tpu(self) -> bool:
        return False

    def is_hpu(self) -> bool:
        return False

    def is_xpu(self) -> bool:
        return False

    def is_neuron(self) -> bool:
        return False

    def is_openvino(self) -> bool:
        return False

    def is_out_of_tree(self) -> bool:
        return False

    def is_cpu(self) -> bool:
        return True


def _build_utils(module: ModuleType) -> None:
    """Engine ``utils``: ``Device`` (GPU=1, CPU=2 as by ``auto()``), ``cdiv``, ``chunk_list``."""
    Device = enum.Enum("Device", "GPU CPU", module=module.__name__, qualname="Device")
    vars(module).update(
        Device=Device,
        cdiv=_cdiv,
        chunk_list=_chunk_list,
        STR_NOT_IMPL_ENC_DEC_SWA=(
            "Sliding window attention is not supported for encoder/decoder models."
        ),
        STR_NOT_IMPL_ENC_DEC_PREFIX_CACHE=(
            "Prefix caching is not supported for encoder/decoder models."
        ),
    )


def _build_logger(module: ModuleType) -> None:
    """Engine ``logger``: ``init_logger(name)`` returns the stdlib logger of that name."""

    def init_logger(name: str) -> logging.Logger:
        return logging.getLogger(name)

    vars(module).update(init_logger=init_logger, logger=logging.getLogger(module.__name__))


def _build_platforms(module: ModuleType) -> None:
    """Engine ``platforms``: ``current_platform`` is a CPU host."""
    vars(module).update(current_platform=_HostPlatform())


def _build_sequence(module: ModuleType) -> None:
    """Engine ``sequence``: the two types the block modules name, as structural protocols."""

    class Sequence(Protocol):
        """What the prefix-cache trackers read from a sequence."""

        seq_id: int

        def get_token_ids(self) -> list[int]: ...

        def extra_hash(self) -> int | None: ...

        def is_prefill(self) -> bool: ...

    class SequenceGroup(Protocol):
        """What the block-manager helpers read from a sequence group."""

        def is_encoder_decoder(self) -> bool: ...

    for cls in (Sequence, SequenceGroup):
        cls.__module__ = module.__name__
        cls.__qualname__ = cls.__name__
    vars(module).update(Sequence=Sequence, SequenceGroup=SequenceGroup)


# --------------------------------------------------------------------------- #
# Flavours: where each upstream keeps its block modules and engine names.
# --------------------------------------------------------------------------- #

_BLOCK_MODULES = (
    "interfaces",
    "common",
    "naive_block",
    "prefix_caching_block",
    "cpu_gpu_block_allocator",
    "block_table",
)
_OPTIONAL_BLOCK_MODULES = ("utils",)


@dataclass(frozen=True)
class _Flavour:
    """Layout of one upstream: module names are dotted, relative to ``top``."""

    label: str
    top: str
    package_dirs: tuple[str, ...]  # directory names that can hold the ``top`` package
    block_package: str  # e.g. "core.block"
    evictors: tuple[str, ...]  # candidate evictor modules, preferred first
    utils: str  # module providing Device/cdiv/chunk_list
    stubs: Mapping[str, Callable[[ModuleType], None]]
    env_var: str
    distributions: tuple[str, ...]  # installed distribution names, for the version string

    def full(self, relative: str) -> str:
        return f"{self.top}.{relative}"

    def block(self, name: str) -> str:
        return self.full(f"{self.block_package}.{name}")


_VLLM = _Flavour(
    label="vLLM v0",
    top="vllm",
    package_dirs=("vllm", "vllm_block"),
    block_package="core.block",
    evictors=("core.evictor", "core.evictor_v2"),
    utils="utils",
    stubs={
        "utils": _build_utils,
        "logger": _build_logger,
        "platforms": _build_platforms,
        "sequence": _build_sequence,
    },
    env_var=VLLM_SOURCE_ENV,
    distributions=("vllm",),
)

_APHRODITE = _Flavour(
    label="Aphrodite",
    top="aphrodite",
    package_dirs=("aphrodite",),
    block_package="processing.block",
    evictors=("processing.evictor_v2", "processing.evictor"),
    utils="common.utils",
    stubs={
        "common.utils": _build_utils,
        "common.logger": _build_logger,
        "logger": _build_logger,
        "platforms": _build_platforms,
        "common.sequence": _build_sequence,
    },
    env_var=APHRODITE_SOURCE_ENV,
    distributions=("aphrodite-engine", "aphrodite"),
)


# --------------------------------------------------------------------------- #
# Sources: a directory tree or a zip/wheel, read into memory up front.
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class _Source:
    """The upstream files of one source, keyed by dotted name relative to ``top``."""

    key: str
    origin: str
    version: str
    files: Mapping[str, SourceFile]


def cached_vllm_wheel() -> Path:
    """Where ``fetch`` puts the vllm-block wheel (it may not exist)."""
    return cache_dir() / VLLM_BLOCK_WHEEL


def cached_aphrodite_wheel() -> Path:
    """Where ``fetch aphrodite`` puts the aphrodite-engine wheel (it may not exist)."""
    return cache_dir() / APHRODITE_WHEEL


def _wanted_paths(flavour: _Flavour) -> dict[str, PurePosixPath]:
    """Dotted relative module name -> file path relative to the package directory."""
    names = [f"{flavour.block_package}.{m}" for m in _BLOCK_MODULES + _OPTIONAL_BLOCK_MODULES]
    names += list(flavour.evictors)
    return {name: PurePosixPath(*name.split(".")).with_suffix(".py") for name in names}


def _check_complete(flavour: _Flavour, files: Mapping[str, SourceFile], origin: str) -> None:
    missing = [m for m in _BLOCK_MODULES if f"{flavour.block_package}.{m}" not in files]
    if not any(e in files for e in flavour.evictors):
        missing.append(" or ".join(flavour.full(e) for e in flavour.evictors))
    if missing:
        names = ", ".join(m if "." in m else flavour.block(m) for m in missing)
        raise UpstreamSourceInvalid(f"{origin}: upstream modules missing: {names}")


def _tree_source(flavour: _Flavour, path: Path) -> _Source:
    root: Path | None = None
    if (
        path.name in flavour.package_dirs
        and (path / flavour.block_package.replace(".", "/")).is_dir()
    ):
        root = path
    else:
        for name in flavour.package_dirs:
            if (path / name / flavour.block_package.replace(".", "/")).is_dir():
                root = path / name
                break
    if root is None:
        layouts = " or ".join(
            f"{d}/{flavour.block_package.replace('.', '/')}/" for d in flavour.package_dirs
        )
        raise UpstreamSourceInvalid(f"{path}: no {layouts} in this directory")
    files: dict[str, SourceFile] = {}
    for name, rel in _wanted_paths(flavour).items():
        file = root / rel
        if file.is_file():
            files[name] = SourceFile(file.read_text(encoding="utf-8"), str(file))
    origin = str(root)
    _check_complete(flavour, files, origin)
    version = "unknown"
    dist_name = root.name.replace("_", "-")
    for meta in sorted(root.parent.glob("*.dist-info/METADATA")):
        parsed = parse_metadata(meta.read_text(encoding="utf-8", errors="replace"))
        if parsed is not None and parsed.split(" ")[0].lower().replace("_", "-") == dist_name:
            version = parsed
            break
    else:
        # No dist-info: the package's own declaration (vLLM's setuptools_scm ``_version.py``,
        # which its ``version.py`` imports; Aphrodite's ``version.py``), parsed, never imported.
        for name in ("_version.py", "version.py"):
            version_file = root / name
            declared = (version_assignment(version_file.read_text(encoding="utf-8"))
                        if version_file.is_file() else None)
            if declared:
                version = f"{flavour.top} {declared}"
                break
    return _Source(key=str(root.resolve()), origin=origin, version=version, files=files)


def _zip_source(flavour: _Flavour, path: Path) -> _Source:
    block_dir = flavour.block_package.replace(".", "/")
    pattern = re.compile(
        rf"^((?:.*/)?(?:{'|'.join(map(re.escape, flavour.package_dirs))}))/{block_dir}/[^/]+\.py$"
    )
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            prefixes = sorted({m.group(1) for n in names if (m := pattern.match(n))}, key=len)
            if not prefixes:
                raise UpstreamSourceInvalid(
                    f"{path}: archive holds no "
                    + " or ".join(f"{d}/{block_dir}/" for d in flavour.package_dirs)
                )
            prefix = prefixes[0]
            present = set(names)
            files: dict[str, SourceFile] = {}
            for name, rel in _wanted_paths(flavour).items():
                member = f"{prefix}/{rel}"
                if member in present:
                    text = archive.read(member).decode("utf-8")
                    files[name] = SourceFile(text, f"{path}/{member}")
            version = "unknown"
            parent = prefix.rpartition("/")[0]
            for member in names:
                head, _, tail = member.rpartition("/")
                sibling = head.endswith(".dist-info") and head.rpartition("/")[0] == parent
                if tail == "METADATA" and sibling:
                    parsed = parse_metadata(archive.read(member).decode("utf-8", "replace"))
                    if parsed is not None:
                        version = parsed
                        break
    except zipfile.BadZipFile as exc:
        raise UpstreamSourceInvalid(f"{path}: not a readable zip/wheel: {exc}") from exc
    origin = f"{path}/{prefix}"
    _check_complete(flavour, files, origin)
    return _Source(key=f"{path.resolve()}::{prefix}", origin=origin, version=version, files=files)


def _read_source(flavour: _Flavour, source: str | os.PathLike[str]) -> _Source:
    path = Path(source).expanduser()
    if path.is_dir():
        return _tree_source(flavour, path)
    if path.is_file():
        if not zipfile.is_zipfile(path):
            raise UpstreamSourceInvalid(f"{path}: neither a source directory nor a zip/wheel")
        return _zip_source(flavour, path)
    raise UpstreamSourceInvalid(f"{path}: no such file or directory")


def _plan(flavour: _Flavour, source: _Source) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    for rel, file in source.files.items():
        entries[flavour.full(rel)] = Entry(package=False, file=file)
    for rel, build in flavour.stubs.items():
        entries[flavour.full(rel)] = Entry(package=False, stub=build)
    return with_packages(entries)


def _owned_names(top: str) -> list[str]:
    return [n for n in sys.modules if n == top or n.startswith(top + ".")]


def _real_package_importable(top: str) -> bool:
    module = sys.modules.get(top)
    if module is not None:
        return not is_ours(module)
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def _execute(flavour: _Flavour, source: _Source, register: bool) -> UpstreamModules:
    """Run the planned imports; leave ``sys.modules`` untouched unless ``register``."""
    entries = _plan(flavour, source)
    loader = PlanLoader(entries, source.origin)
    finder = PlanFinder(entries, loader)
    saved = {name: sys.modules.pop(name) for name in _owned_names(flavour.top)}
    if register and saved:
        raise UpstreamError(f"internal: {flavour.top} is already in sys.modules")
    sys.meta_path.insert(0, finder)
    ok = False
    try:
        modules = {m: _import(flavour, flavour.block(m), source) for m in _BLOCK_MODULES}
        block_utils_name = f"{flavour.block_package}.utils"
        block_utils = (
            _import(flavour, flavour.full(block_utils_name), source)
            if block_utils_name in source.files
            else None
        )
        loaded_evictors = [e for e in flavour.evictors if flavour.full(e) in sys.modules]
        evictor_rel = (loaded_evictors or [e for e in flavour.evictors if e in source.files])[0]
        evictor = _import(flavour, flavour.full(evictor_rel), source)
        utils = _import(flavour, flavour.full(flavour.utils), source)
        ok = True
    finally:
        sys.meta_path.remove(finder)
        if not (register and ok):
            for name in _owned_names(flavour.top):
                del sys.modules[name]
            sys.modules.update(saved)
    return UpstreamModules(
        **modules,
        evictor=evictor,
        utils=utils,
        block_utils=block_utils,
        version=source.version,
        origin=source.origin,
        registered=register,
        stubbed=tuple(sorted(set(loader.stubbed))),
    )


def _import(flavour: _Flavour, name: str, source: _Source) -> ModuleType:
    try:
        return importlib.import_module(name)
    except UpstreamError:
        raise
    except ImportError as exc:
        missing = exc.name or "?"
        if missing == flavour.top or missing.startswith(flavour.top + "."):
            raise UpstreamSourceInvalid(
                f"{source.origin}: loading {name} failed: {exc}; "
                f"{missing} is neither a block module nor an engine stub"
            ) from exc
        raise UpstreamSourceInvalid(f"{source.origin}: loading {name} failed: {exc}") from exc
    except Exception as exc:  # upstream code raised while executing
        raise UpstreamSourceInvalid(
            f"{source.origin}: executing {name} raised {type(exc).__name__}: {exc}"
        ) from exc


# --------------------------------------------------------------------------- #
# Installed real packages.
# --------------------------------------------------------------------------- #


def _installed_package_dir(top: str) -> Path | None:
    """The directory of an installed, not-ours ``top`` package, found without importing it."""
    module = sys.modules.get(top)
    if module is not None:
        if is_ours(module):
            return None
        locations = list(getattr(module, "__path__", []))
    else:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return None
        if spec is None or spec.submodule_search_locations is None:
            return None
        locations = list(spec.submodule_search_locations)
    return Path(locations[0]) if locations else None


def _installed_has_blocks(flavour: _Flavour) -> bool:
    root = _installed_package_dir(flavour.top)
    if root is None:
        return False
    block_dir = root / flavour.block_package.replace(".", "/")
    return all((block_dir / f"{m}.py").is_file() for m in _BLOCK_MODULES)


def _installed_version(flavour: _Flavour) -> str:
    for dist in flavour.distributions:
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"{flavour.top} unknown"


def _load_installed(flavour: _Flavour) -> UpstreamModules:
    root = _installed_package_dir(flavour.top)
    origin = str(root) if root is not None else flavour.top

    def real(rel: str) -> ModuleType:
        try:
            return importlib.import_module(flavour.full(rel))
        except Exception as exc:
            raise UpstreamSourceInvalid(
                f"installed {flavour.top} at {origin}: importing {flavour.full(rel)} "
                f"raised {type(exc).__name__}: {exc}"
            ) from exc

    modules = {m: real(f"{flavour.block_package}.{m}") for m in _BLOCK_MODULES}
    evictor_rel = next(
        (e for e in flavour.evictors if flavour.full(e) in sys.modules), flavour.evictors[0]
    )
    block_utils: ModuleType | None
    try:
        block_utils = real(f"{flavour.block_package}.utils")
    except UpstreamSourceInvalid:
        block_utils = None
    return UpstreamModules(
        **modules,
        evictor=real(evictor_rel),
        utils=real(flavour.utils),
        block_utils=block_utils,
        version=_installed_version(flavour),
        origin=origin,
        registered=True,
        stubbed=(),
    )


# --------------------------------------------------------------------------- #
# Public entry points.
# --------------------------------------------------------------------------- #

_LOCK = threading.RLock()
_LOADED: dict[tuple[str, str], UpstreamModules] = {}


def _load(flavour: _Flavour, source: str | os.PathLike[str] | None) -> UpstreamModules:
    with _LOCK:
        if source is None:
            source = os.environ.get(flavour.env_var) or None
        if source is None:
            if _installed_has_blocks(flavour):
                key = (flavour.top, "<installed>")
                if key not in _LOADED:
                    _LOADED[key] = _load_installed(flavour)
                return _LOADED[key]
            source = _default_source(flavour)
        parsed = _read_source(flavour, source)
        key = (flavour.top, parsed.key)
        if key in _LOADED:
            return _LOADED[key]
        # Register only when nobody (real package or an earlier load) owns the names.
        register = not _owned_names(flavour.top) and not _real_package_importable(flavour.top)
        loaded = _execute(flavour, parsed, register=register)
        _LOADED[key] = loaded
        return loaded


def _default_source(flavour: _Flavour) -> Path:
    if flavour is _VLLM:
        installed_block = _installed_package_dir("vllm_block")
        if installed_block is not None and (installed_block / "core" / "block").is_dir():
            return installed_block
        wheel = cached_vllm_wheel()
        if wheel.is_file():
            return wheel
        raise UpstreamSourceMissing(
            f"no {flavour.label} block allocator source: set ${flavour.env_var} to a source "
            f"tree or wheel, install vllm, or run `{FETCH_COMMAND}` "
            f"(downloads {VLLM_BLOCK_REQUIREMENT} to {wheel})"
        )
    wheel = cached_aphrodite_wheel()
    if wheel.is_file():
        return wheel
    raise UpstreamSourceMissing(
        f"no {flavour.label} block allocator source: set ${flavour.env_var} to a directory "
        f"holding aphrodite/processing/block/ (or a zip/wheel of one), install aphrodite, or "
        f"run `{APHRODITE_FETCH_COMMAND}` (downloads {APHRODITE_REQUIREMENT} to {wheel})"
    )


def load_vllm_v0(source: str | os.PathLike[str] | None = None) -> UpstreamModules:
    """Load vLLM v0's block allocator modules (see the module docstring for ``source``)."""
    return _load(_VLLM, source)


def load_aphrodite(source: str | os.PathLike[str] | None = None) -> UpstreamModules:
    """Load Aphrodite's block allocator modules (see the module docstring for ``source``)."""
    return _load(_APHRODITE, source)


def vllm_v0_allocator(
    allocator_type: str, num_gpu_blocks: int, num_cpu_blocks: int, block_size: int
) -> Any:
    """Target factory: upstream vLLM ``CpuGpuBlockAllocator.create(...)``.

    Returns the upstream ``DeviceAwareBlockAllocator`` (typed ``Any``: its class
    only exists at run time).
    """
    cls = load_vllm_v0().cpu_gpu_block_allocator.CpuGpuBlockAllocator
    return cls.create(allocator_type, num_gpu_blocks, num_cpu_blocks, block_size)


def aphrodite_allocator(
    allocator_type: str, num_gpu_blocks: int, num_cpu_blocks: int, block_size: int
) -> Any:
    """Target factory: upstream Aphrodite ``CpuGpuBlockAllocator.create(...)``."""
    cls = load_aphrodite().cpu_gpu_block_allocator.CpuGpuBlockAllocator
    return cls.create(allocator_type, num_gpu_blocks, num_cpu_blocks, block_size)


def prefixcache_claims(factory: Any) -> dict[str, Any]:
    """What the suite may assume about the upstream targets of this module (see
    ``properties.core.targets``): LRU is claimed; atomicity and typed errors are not."""
    load = load_aphrodite if factory is aphrodite_allocator else load_vllm_v0
    name = "aphrodite" if factory is aphrodite_allocator else "vllm"
    return {"name": name, "version": load().version, "lru": True, "atomic": False,
            "typed_errors": False}


def fetch_vllm_block(dest: Path | None = None, runner: Runner | None = None) -> Path:
    """Download the vllm-block wheel into ``dest`` (default: the cache) with pip; return its path.

    An existing wheel is kept. Raises ``UpstreamSourceMissing`` if pip ran but the
    wheel is not there afterwards.
    """
    target_dir = cache_dir() if dest is None else dest
    return pip_download(VLLM_BLOCK_REQUIREMENT, target_dir, VLLM_BLOCK_WHEEL, (), runner)


def fetch_aphrodite(dest: Path | None = None, runner: Runner | None = None) -> Path:
    """Download the aphrodite-engine 0.6.5 wheel into ``dest`` (default: the cache); return it.

    The wheel is binary but only read as a zip, so its platform is asked for explicitly: the
    same file is fetched on any host. Nothing is installed.
    """
    target_dir = cache_dir() if dest is None else dest
    return pip_download(APHRODITE_REQUIREMENT, target_dir, APHRODITE_WHEEL,
                         ("--only-binary=:all:", "--platform", "manylinux1_x86_64"), runner)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``fetch [vllm|aphrodite]`` downloads a flavour's wheel to the cache; ``info`` loads
    a flavour and describes it."""
    parser = argparse.ArgumentParser(prog="python -m properties.upstream")
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser(
        "fetch", help=f"download {VLLM_BLOCK_REQUIREMENT} (default) or {APHRODITE_REQUIREMENT}")
    fetch.add_argument("flavour", choices=("vllm", "aphrodite"), nargs="?", default="vllm")
    fetch.add_argument("--dest", type=Path, default=None, help=f"directory (default {cache_dir()})")
    info = commands.add_parser("info", help="load upstream modules and print where they came from")
    info.add_argument("flavour", choices=("vllm", "aphrodite"), nargs="?", default="vllm")
    info.add_argument("--source", default=None, help="source tree or wheel (default: lookup)")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            get = fetch_vllm_block if args.flavour == "vllm" else fetch_aphrodite
            print(get(args.dest))
            return 0
        load = load_vllm_v0 if args.flavour == "vllm" else load_aphrodite
        mods = load(args.source)
    except UpstreamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"version:    {mods.version}")
    print(f"origin:     {mods.origin}")
    print(f"registered: {mods.registered}")
    print(f"stubbed:    {', '.join(mods.stubbed) or '-'}")
    print(f"evictor:    {mods.evictor.__name__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
