"""Load vLLM's CPU KV offloading manager from a vllm wheel (or source tree) without torch.

Two API generations are loaded, each from its own modules under their upstream names:

* ``cpu-manager`` (0.33.0, 0.34.0): ``vllm/v1/kv_offload/base.py``, ``config.py``,
  ``cpu/common.py``, ``cpu/manager.py`` (``CPUOffloadingManager``) and
  ``cpu/policies/{base,factory,lru,arc}.py``, plus ``vllm/v1/metrics/cache_hit_source.py`` and
  ``vllm/utils/math_utils.py``.
* ``lru-backend`` (0.11.0): ``vllm/v1/kv_offload/{abstract,backend,mediums,lru_manager}.py``
  and ``backends/cpu.py`` (``LRUOffloadingManager(CPUBackend(...))``).

The rest of the import closure comes from :mod:`properties.families.offload.stand_ins` (each
documented with why it cannot change an observed result); real ``numpy`` and
``typing_extensions`` are used when installed. The policy factory of the ``cpu-manager``
generation imports a policy's module lazily, by name, when a manager is built; after the load
its two built-in entries are bound to the very classes loaded here (what the lazy import would
return), since the upstream names are gone from ``sys.modules`` by then.

Isolation: each load executes the modules under their upstream names, then restores
``sys.modules`` exactly as it was, so a real vllm, the v1 family's loads and several offload
releases coexist. Loads are memoised per (source, patches).

Source lookup when ``source`` is None: ``$PREFIXCACHE_VLLM_OFFLOAD_SOURCE`` (default release
only), else the cached wheel ``vllm-<version>-*.whl`` under the core cache directory, which
``python -m properties.families.offload.upstream fetch --version V`` downloads. The version
reported is the wheel's metadata, not the version asked for.

API drift is detected from the loaded classes (:func:`capabilities`), never from the version.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import inspect
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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
    apply_patches,
    cache_dir,
    pip_download,
    read_modules,
    with_packages,
)
from properties.families.offload import stand_ins

__all__ = [
    "DEFAULT_VERSION",
    "FETCH_COMMAND",
    "SOURCE_ENV",
    "SUPPORTED_VERSIONS",
    "Capabilities",
    "OffloadModules",
    "OffloadUnsupported",
    "cached_wheel",
    "capabilities",
    "fetch",
    "load_vllm_offload",
    "main",
    "new_manager",
]

DEFAULT_VERSION = "0.34.0"
SUPPORTED_VERSIONS = ("0.34.0", "0.33.0", "0.11.0")
FETCH_COMMAND = "python -m properties.families.offload.upstream fetch"
SOURCE_ENV = "PREFIXCACHE_VLLM_OFFLOAD_SOURCE"

Patch = tuple[str, str, str]  # (module relative to vllm, old text, new text)

CPU_MANAGER = "cpu-manager"
LRU_BACKEND = "lru-backend"

# Module (relative to ``vllm``) of each generation; all are required by their generation.
_GENERATIONS: dict[str, tuple[str, ...]] = {
    CPU_MANAGER: (
        "v1.kv_offload.base",
        "v1.kv_offload.config",
        "v1.kv_offload.cpu.common",
        "v1.kv_offload.cpu.policies.base",
        "v1.kv_offload.cpu.policies.factory",
        "v1.kv_offload.cpu.policies.lru",
        "v1.kv_offload.cpu.policies.arc",
        "v1.kv_offload.cpu.manager",
        "v1.metrics.cache_hit_source",
        "utils.math_utils",
    ),
    LRU_BACKEND: (
        "v1.kv_offload.abstract",
        "v1.kv_offload.backend",
        "v1.kv_offload.mediums",
        "v1.kv_offload.backends.cpu",
        "v1.kv_offload.lru_manager",
    ),
}
# The module whose presence names a generation.
_MARKERS = {CPU_MANAGER: "v1.kv_offload.cpu.manager", LRU_BACKEND: "v1.kv_offload.lru_manager"}


class OffloadUnsupported(UpstreamSourceInvalid):
    """The source holds no offload generation this loader knows, or one is incomplete."""


@dataclass(frozen=True)
class OffloadModules:
    """The modules of one load. ``manager`` is ``cpu/manager.py`` (``cpu-manager``) or
    ``lru_manager.py`` (``lru-backend``); ``types`` is ``base.py`` / ``abstract.py``."""

    generation: str
    version: str
    origin: str
    manager: ModuleType
    types: ModuleType
    modules: Mapping[str, ModuleType]
    stubbed: tuple[str, ...]
    patches: tuple[Patch, ...] = ()


@dataclass(frozen=True)
class Capabilities:
    """What a release's offload manager offers, detected from its API."""

    generation: str
    policies: tuple[str, ...]  # cache policies by name ("lru" alone for lru-backend)
    per_key_lookup: bool  # lookup(key, req_context) -> LookupResult; else lookup(hashes) -> int
    req_context: bool  # every call takes a ReqContext
    touch: bool  # the manager has touch() (0.11.0, 0.33.0)
    request_access_hook: bool  # policies rank on on_request_access, commit on finish (0.34.0)
    threshold_once_per_request: bool  # store_threshold counts a key once per request
    store_threshold: bool  # constructor takes store_threshold / max_tracker_size
    reset_cache: bool  # the manager overrides reset_cache
    metadata_only_events: bool  # failed stores reported as metadata-only removals
    stored_event_context: bool  # stored events carry the request context


def _params(func: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    return inspect.signature(func).parameters


def capabilities(mods: OffloadModules) -> Capabilities:
    """The API drift of a load (which classes, methods and parameters exist)."""
    if mods.generation == LRU_BACKEND:
        cls = mods.manager.LRUOffloadingManager
        event_fields = {f.name for f in dataclasses.fields(mods.types.OffloadingEvent)}
        return Capabilities(LRU_BACKEND, ("lru",), False, False, hasattr(cls, "touch"), False,
                            False, False, False, "metadata_only" in event_fields, False)
    cls = mods.manager.CPUOffloadingManager
    factory = mods.modules["v1.kv_offload.cpu.policies.factory"].CachePolicyFactory
    policy_base = mods.modules["v1.kv_offload.cpu.policies.base"].CachePolicy
    access = getattr(mods.manager, "_RequestCacheAccess", None)
    access_fields = {f.name for f in dataclasses.fields(access)} if access is not None else set()
    event_fields = {f.name for f in dataclasses.fields(mods.types.OffloadingEvent)}
    init = _params(cls.__init__)
    return Capabilities(
        generation=CPU_MANAGER,
        policies=tuple(sorted(factory._registry)),
        per_key_lookup="key" in _params(cls.lookup),
        req_context="req_context" in _params(cls.prepare_store),
        touch="touch" in vars(cls),
        request_access_hook="on_request_access" in vars(policy_base)
        and "touch" not in vars(policy_base),
        threshold_once_per_request="counted_keys" in access_fields,
        store_threshold="store_threshold" in init and "max_tracker_size" in init,
        reset_cache="reset_cache" in vars(cls),
        metadata_only_events="metadata_only" in event_fields,
        stored_event_context="req_context" in event_fields,
    )


# --------------------------------------------------------------------------- #
# Sources
# --------------------------------------------------------------------------- #


def cached_wheel(version: str = DEFAULT_VERSION) -> Path | None:
    """The cached wheel of ``version``, if fetched."""
    found = sorted(cache_dir().glob(f"vllm-{version}-*.whl"))
    return found[0] if found else None


def _default_source(version: str) -> Path:
    env = os.environ.get(SOURCE_ENV)
    if env and version == DEFAULT_VERSION:
        return Path(env).expanduser()
    wheel = cached_wheel(version)
    if wheel is None:
        raise UpstreamSourceMissing(
            f"no vllm {version} wheel: set ${SOURCE_ENV} to a wheel or tree, or run "
            f"`{FETCH_COMMAND} --version {version}` (downloads it to {cache_dir()})"
        )
    return wheel


def _read(source: Path) -> tuple[str, str, str, dict[str, SourceFile]]:
    """(generation, origin, version, files) of a wheel or tree; typed error if no generation
    is complete there."""
    wanted = {rel: False for rels in _GENERATIONS.values() for rel in rels}
    read = read_modules(source, "vllm", wanted)
    for generation, marker in _MARKERS.items():
        if marker not in read.files:
            continue
        missing = [rel for rel in _GENERATIONS[generation] if rel not in read.files]
        if missing:
            raise OffloadUnsupported(
                f"{read.origin} ({read.version}): the {generation} offload generation is "
                f"incomplete; missing: {', '.join('vllm.' + m for m in missing)}"
            )
        files = {rel: read.files[rel] for rel in _GENERATIONS[generation]}
        return generation, read.origin, read.version, files
    raise OffloadUnsupported(
        f"{read.origin} ({read.version}): no CPU offload manager: neither "
        f"vllm.{_MARKERS[CPU_MANAGER]} (0.33.0+) nor vllm.{_MARKERS[LRU_BACKEND]} (0.11.0)"
    )


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #

_LOCK = threading.RLock()
_LOADED: dict[tuple[str, tuple[Patch, ...]], OffloadModules] = {}


def _plan(generation: str, files: Mapping[str, SourceFile]) -> dict[str, Entry]:
    entries: dict[str, Entry] = {f"vllm.{rel}": Entry(False, file=f) for rel, f in files.items()}
    stubs = stand_ins.CORE_STUBS if generation == CPU_MANAGER else stand_ins.LEGACY_STUBS
    for name, build in stubs.items():
        entries.setdefault(name, Entry(False, stub=build))
    if importlib.util.find_spec("numpy") is None:
        entries["numpy"] = Entry(False, stub=stand_ins.NUMPY_STUB)
    if importlib.util.find_spec("typing_extensions") is None:
        entries["typing_extensions"] = Entry(False, stub=stand_ins.TYPING_EXTENSIONS_STUB)
    return with_packages(entries)


def _run(entries: Mapping[str, Entry], origin: str, names: Sequence[str]
         ) -> tuple[dict[str, ModuleType], tuple[str, ...]]:
    """Import ``vllm.<name>`` for each name under the plan; ``sys.modules`` is restored after."""
    loader = PlanLoader(entries, origin)
    finder = PlanFinder(entries, loader)
    tops = {name.split(".")[0] for name in entries}
    saved = {n: sys.modules.pop(n) for n in list(sys.modules) if n.split(".")[0] in tops}
    sys.meta_path.insert(0, finder)
    try:
        mods: dict[str, ModuleType] = {}
        for rel in names:
            name = f"vllm.{rel}"
            try:
                mods[rel] = importlib.import_module(name)
            except ImportError as exc:
                raise OffloadUnsupported(
                    f"{origin}: loading {name} failed: {exc} (neither a planned module nor a "
                    "stand-in)"
                ) from exc
            except Exception as exc:  # upstream code raised while executing
                raise UpstreamSourceInvalid(
                    f"{origin}: executing {name} raised {type(exc).__name__}: {exc}"
                ) from exc
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.split(".")[0] in tops]:
            del sys.modules[name]
        sys.modules.update(saved)
    return mods, tuple(sorted(set(loader.stubbed)))


def _bind_policy_factory(mods: Mapping[str, ModuleType]) -> None:
    """Bind the factory's built-in names to the loaded classes (its lazy import by module
    name would find nothing once ``sys.modules`` is restored)."""
    registry = mods["v1.kv_offload.cpu.policies.factory"].CachePolicyFactory._registry
    for name, rel, attr in (("lru", "lru", "LRUCachePolicy"), ("arc", "arc", "ARCCachePolicy")):
        if name in registry:
            cls = getattr(mods[f"v1.kv_offload.cpu.policies.{rel}"], attr)
            registry[name] = lambda cls=cls: cls


def load_vllm_offload(
    source: str | os.PathLike[str] | None = None,
    *,
    version: str = DEFAULT_VERSION,
    patches: Sequence[Patch] = (),
) -> OffloadModules:
    """Load a release's offload manager modules (see the module docstring), optionally patched.

    Raises :class:`UpstreamSourceMissing` when no source is found, :class:`OffloadUnsupported`
    when the source has no complete offload generation."""
    with _LOCK:
        path = Path(source).expanduser() if source is not None else _default_source(version)
        key = (str(path.resolve()), tuple(patches))
        if key not in _LOADED:
            generation, origin, found, files = _read(path)
            files = apply_patches(files, patches, "vllm")
            mods, stubbed = _run(_plan(generation, files), origin, _GENERATIONS[generation])
            if generation == CPU_MANAGER:
                _bind_policy_factory(mods)
                manager, types = mods["v1.kv_offload.cpu.manager"], mods["v1.kv_offload.base"]
            else:
                manager = mods["v1.kv_offload.lru_manager"]
                types = mods["v1.kv_offload.abstract"]
            _LOADED[key] = OffloadModules(generation, found, origin, manager, types, mods,
                                          stubbed, key[1])
        return _LOADED[key]


def new_manager(mods: OffloadModules, num_chunks: int, *, cache_policy: str = "lru",
                enable_events: bool = True, store_threshold: int = 1,
                max_tracker_size: int = 64_000) -> Any:
    """A fresh manager of ``num_chunks`` chunks from a load, whatever its generation.

    ``lru-backend`` takes only ``lru`` and no threshold: other values raise
    :class:`OffloadUnsupported`."""
    if mods.generation == CPU_MANAGER:
        return mods.manager.CPUOffloadingManager(
            num_chunks, cache_policy=cache_policy, enable_events=enable_events,
            store_threshold=store_threshold, max_tracker_size=max_tracker_size)
    if cache_policy != "lru" or store_threshold != 1:
        raise OffloadUnsupported(
            f"vllm {mods.version}: LRUOffloadingManager has no cache_policy={cache_policy!r} "
            f"or store_threshold={store_threshold}")
    backend = mods.modules["v1.kv_offload.backends.cpu"].CPUBackend(1, num_chunks)
    return mods.manager.LRUOffloadingManager(backend, enable_events=enable_events)


def fetch(version: str = DEFAULT_VERSION, dest: Path | None = None,
          runner: Runner | None = None) -> Path:
    """Download the vllm ``version`` wheel (no dependencies) into ``dest`` (default: the cache)."""
    return pip_download(f"vllm=={version}", cache_dir() if dest is None else dest,
                        f"vllm-{version}-*.whl", ("--only-binary", ":all:"), runner)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``fetch`` downloads a release's wheel; ``info`` loads one and describes it."""
    parser = argparse.ArgumentParser(prog="python -m properties.families.offload.upstream")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("fetch", "info"):
        sub = commands.add_parser(name)
        sub.add_argument("--version", choices=SUPPORTED_VERSIONS, default=DEFAULT_VERSION)
        if name == "fetch":
            sub.add_argument("--dest", type=Path, default=None)
        else:
            sub.add_argument("--source", default=None)
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            print(fetch(args.version, args.dest))
            return 0
        mods = load_vllm_offload(args.source, version=args.version)
    except UpstreamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"version:    {mods.version}\ngeneration: {mods.generation}\norigin:     {mods.origin}")
    print(f"stubbed:    {', '.join(mods.stubbed)}")
    print(f"caps:       {capabilities(mods)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
