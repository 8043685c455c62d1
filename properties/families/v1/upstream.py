"""Load vLLM v1's real ``BlockPool`` from a vllm wheel (or source tree) without torch.

The modules ``vllm/v1/core/block_pool.py``, ``kv_cache_utils.py``, ``kv_cache_metrics.py``,
``vllm/utils/hashing.py`` and ``vllm/utils/math_utils.py`` (the last three where the release has
them) are executed from the wheel under their upstream names; the rest of their import closure
comes from the small stand-ins of :mod:`properties.families.v1.stand_ins`. The import machinery (a
meta path finder serving exactly the planned names) and the wheel/tree reading are the core's
(:mod:`properties.core.sources`), shared with the v0 loader.

Isolation: every load is isolated. The modules are executed under their upstream names, then
``sys.modules`` is restored exactly as it was, so a v0 load (which may register ``vllm.core``),
a real ``vllm`` installation and several v1 releases coexist in one process. Loads are
memoised per (source, patches): the same source always yields the same module objects.

Source lookup for a release when ``source`` is None: ``$PREFIXCACHE_VLLM_V1_SOURCE`` (a wheel or
a tree holding ``vllm/v1/core/``), else the cached wheel ``vllm-<version>-*.whl`` under
:func:`properties.core.sources.cache_dir`, which ``python -m properties.families.v1.upstream
fetch`` downloads (``--version``: 0.33.0, the default, or 0.11.0).

Supported releases: 0.33.0 (the newest) and 0.11.0, the last release before the pool learnt
``hash_block_size``, partial-block keys, ``evict_blocks``, block metrics and the "unhashed
blocks to the queue front" free rule, and whose ``touch`` takes one list per group: the widest
API drift one loader has to absorb, and a release many deployments still ran in 2026. Drift is
detected by :func:`capabilities`, never by forking code.

``patches`` applies textual find/replace edits to a module's source before it runs (each must
match exactly once); the self-test zoo builds broken pools that way.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    apply_patches,
    cache_dir,
    pip_download,
    read_modules,
    with_packages,
)
from properties.families.v1 import stand_ins

__all__ = [
    "DEFAULT_VERSION",
    "FETCH_COMMAND",
    "SOURCE_ENV",
    "SUPPORTED_VERSIONS",
    "Capabilities",
    "Patch",
    "V1Modules",
    "cached_wheel",
    "capabilities",
    "fetch",
    "load_vllm_v1",
]

DEFAULT_VERSION = "0.33.0"
SUPPORTED_VERSIONS = ("0.33.0", "0.11.0")
FETCH_COMMAND = "python -m properties.upstream fetch vllm-v1"
SOURCE_ENV = "PREFIXCACHE_VLLM_V1_SOURCE"

# Module (relative to ``vllm``) -> whether every supported release has it.
_MODULES: dict[str, bool] = {
    "v1.core.kv_cache_utils": True,
    "v1.core.block_pool": True,
    "v1.core.kv_cache_metrics": False,
    "utils.hashing": False,
    "utils.math_utils": False,
}

Patch = tuple[str, str, str]  # (module relative to vllm, old text, new text)


@dataclass(frozen=True)
class V1Modules:
    """The modules of one load; ``hashing`` is None for releases with ``utils`` unsplit."""

    block_pool: ModuleType
    kv_cache_utils: ModuleType
    kv_cache_metrics: ModuleType | None
    hashing: ModuleType | None
    version: str
    origin: str
    stubbed: tuple[str, ...]
    patches: tuple[Patch, ...] = field(default=())


@dataclass(frozen=True)
class Capabilities:
    """What a release's pool offers, detected from its API (not from its behaviour)."""

    hash_block_size: bool  # constructor takes hash_block_size
    touch_per_group: bool  # touch takes a tuple of per-group lists (0.11)
    unhashed_free_to_front: bool  # freed unhashed blocks go to the queue front (LIFO)
    evict_blocks: bool
    partial_blocks: bool  # cache_partial_block and alias keys
    keys_prompt_embeds: bool
    skips_null_blocks: bool  # cache_full_blocks skips null (window-skipped) entries


def capabilities(mods: V1Modules) -> Capabilities:
    pool = mods.block_pool.BlockPool
    utils = mods.kv_cache_utils
    params = inspect.signature(pool.__init__).parameters
    touch_ann = str(inspect.signature(pool.touch).parameters["blocks"].annotation)
    return Capabilities(
        hash_block_size="hash_block_size" in params,
        touch_per_group="tuple" in touch_ann,
        unhashed_free_to_front=hasattr(utils.FreeKVCacheBlockQueue, "prepend_n"),
        evict_blocks=hasattr(pool, "evict_blocks"),
        partial_blocks=hasattr(pool, "cache_partial_block"),
        keys_prompt_embeds=hasattr(utils, "_gen_prompt_embeds_extra_hash_keys"),
        skips_null_blocks="block_mask" in inspect.signature(pool.cache_full_blocks).parameters,
    )


# --------------------------------------------------------------------------- #
# Sources
# --------------------------------------------------------------------------- #


def _read(source: Path, modules: Mapping[str, bool] = _MODULES
          ) -> tuple[str, str, dict[str, SourceFile]]:
    """(origin, version, files by module relative to ``vllm``) of a wheel or a tree.

    ``modules``: module -> required (default: the block level's; a hook for wider loads)."""
    read = read_modules(source, "vllm", modules)
    return read.origin, read.version, read.files


def _patched(files: dict[str, SourceFile], patches: Sequence[Patch]) -> dict[str, SourceFile]:
    return apply_patches(files, patches, "vllm")


def cached_wheel(version: str = DEFAULT_VERSION) -> Path | None:
    """The cached wheel of ``version``, if fetched."""
    found = sorted(cache_dir().glob(f"vllm-{version}-*.whl"))
    return found[0] if found else None


def source_from_env(version: str) -> Path | None:
    """``$PREFIXCACHE_VLLM_V1_SOURCE`` (it names the default release's source only)."""
    env = os.environ.get(SOURCE_ENV)
    return Path(env).expanduser() if env and version == DEFAULT_VERSION else None


def _default_source(version: str) -> Path:
    env = source_from_env(version)
    if env is not None:
        return env
    wheel = cached_wheel(version)
    if wheel is None:
        raise UpstreamSourceMissing(
            f"no vllm {version} wheel: set ${SOURCE_ENV} to a wheel or tree, or run "
            f"`{FETCH_COMMAND} --version {version}` (downloads it to {cache_dir()})"
        )
    return wheel


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #

_LOCK = threading.RLock()
_LOADED: dict[tuple[str, tuple[Patch, ...]], V1Modules] = {}


StubMap = Mapping[str, Callable[[ModuleType], None]]


def _plan(files: Mapping[str, SourceFile], real_hashing: bool,
          stubs: StubMap | None = None) -> dict[str, Entry]:
    """``stubs``: stand-ins by dotted name (default :data:`stand_ins.STUBS`); a real file of
    the same name wins."""
    entries: dict[str, Entry] = {f"vllm.{rel}": Entry(False, file=f) for rel, f in files.items()}
    for name, build in (stand_ins.STUBS if stubs is None else stubs).items():
        entries.setdefault(name, Entry(False, stub=build))
    if not real_hashing:
        entries["vllm.utils"] = Entry(False, stub=stand_ins.ENGINE_UTILS_STUB)
    if importlib.util.find_spec("cbor2") is None:
        entries["cbor2"] = Entry(False, stub=stand_ins.CBOR2_STUB)
    return with_packages(entries)


def _execute(origin: str, version: str, files: dict[str, SourceFile],
             patches: tuple[Patch, ...]) -> V1Modules:
    real_hashing = "utils.hashing" in files
    mods, stubbed = run_plan(_plan(files, real_hashing), origin, files)
    utils = mods["v1.core.kv_cache_utils"]
    hash_fn = mods["utils.hashing"].sha256 if real_hashing else stand_ins._sha256
    utils.init_none_hash(hash_fn)
    return V1Modules(
        block_pool=mods["v1.core.block_pool"],
        kv_cache_utils=utils,
        kv_cache_metrics=mods.get("v1.core.kv_cache_metrics"),
        hashing=mods.get("utils.hashing"),
        version=version,
        origin=origin,
        stubbed=stubbed,
        patches=patches,
    )


def run_plan(entries: Mapping[str, Entry], origin: str, names: Iterable[str],
             during: Callable[[dict[str, ModuleType]], None] | None = None,
             ) -> tuple[dict[str, ModuleType], tuple[str, ...]]:
    """Import ``vllm.<name>`` for each of ``names`` under the plan, isolated (``sys.modules``
    restored afterwards); ``during`` runs on the modules while the plan is still installed
    (for upstream code that imports lazily, e.g. a registry filled on first use). Returns the
    modules by name and the stubbed names."""
    loader = PlanLoader(entries, origin)
    finder = PlanFinder(entries, loader)
    tops = {name.split(".")[0] for name in entries}  # "vllm", and "cbor2" when stubbed
    saved = {n: sys.modules.pop(n) for n in list(sys.modules) if n.split(".")[0] in tops}
    sys.meta_path.insert(0, finder)
    try:
        mods = {rel: _import(f"vllm.{rel}", origin) for rel in names}
        if during is not None:
            during(mods)
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.split(".")[0] in tops]:
            del sys.modules[name]
        sys.modules.update(saved)
    return mods, tuple(sorted(set(loader.stubbed)))


def _import(name: str, origin: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise UpstreamSourceInvalid(
            f"{origin}: loading {name} failed: {exc} (neither a loaded module nor a stand-in)"
        ) from exc
    except Exception as exc:  # upstream code raised while executing
        raise UpstreamSourceInvalid(
            f"{origin}: executing {name} raised {type(exc).__name__}: {exc}"
        ) from exc


def load_vllm_v1(
    source: str | os.PathLike[str] | None = None,
    *,
    version: str = DEFAULT_VERSION,
    patches: Sequence[Patch] = (),
) -> V1Modules:
    """Load a v1 release's block modules (see the module docstring), optionally patched."""
    with _LOCK:
        path = Path(source).expanduser() if source is not None else _default_source(version)
        key = (str(path.resolve()), tuple(patches))
        if key not in _LOADED:
            origin, found_version, files = _read(path)
            _LOADED[key] = _execute(origin, found_version, _patched(files, patches), key[1])
        return _LOADED[key]


def hash_function(mods: V1Modules) -> Any:
    """The release's pickle SHA-256 block hasher (its default ``prefix_caching_hash_algo``)."""
    return mods.hashing.sha256 if mods.hashing is not None else stand_ins._sha256


def fetch(version: str = DEFAULT_VERSION, dest: Path | None = None,
          runner: Runner | None = None) -> Path:
    """Download the vllm ``version`` wheel (no dependencies) into ``dest`` (default: the cache)."""
    return pip_download(f"vllm=={version}", cache_dir() if dest is None else dest,
                         f"vllm-{version}-*.whl", ("--only-binary", ":all:"), runner)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``fetch`` downloads a release's wheel; ``info`` loads one and describes it."""
    parser = argparse.ArgumentParser(prog="python -m properties.families.v1.upstream")
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
        mods = load_vllm_v1(args.source, version=args.version)
    except UpstreamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"version: {mods.version}\norigin:  {mods.origin}")
    print(f"stubbed: {', '.join(mods.stubbed)}")
    print(f"caps:    {capabilities(mods)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
