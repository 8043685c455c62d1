"""Load vLLM v1's real ``BlockPool`` from a vllm wheel (or source tree) without torch.

The loader resolves the pool's import closure itself (:mod:`properties.families.v1.closure`):
from :data:`ROOTS` (``kv_cache_utils``, ``block_pool``) it follows every import within the
source, executing upstream's own module wherever it is pure Python whose imports load without
torch (``kv_cache_metrics``, ``utils.hashing``, ``utils.math_utils``, 0.34's ``token_buffer``
and ``utils.gc_utils``, ...), and a stand-in of :mod:`properties.families.v1.stand_ins` only
for engine plumbing (:func:`block_policy`). A release that still cannot load is a
``ClosureError`` naming the missing module and the import chain that reached it. The import
machinery (a meta path finder serving exactly the planned names) is the core's
(:mod:`properties.core.sources`), shared with the v0 loader.

Isolation: every load is isolated. The modules are executed under their upstream names, then
``sys.modules`` is restored exactly as it was, so a v0 load (which may register ``vllm.core``),
a real ``vllm`` installation and several v1 releases coexist in one process. Loads are
memoised per (source, patches): the same source always yields the same module objects.

Source lookup for a release when ``source`` is None: ``$PREFIXCACHE_VLLM_V1_SOURCE`` (a wheel or
a tree holding ``vllm/v1/core/``: a checkout, or a wheel unzipped) when it is that release's
source (:func:`source_from_env`: always for the default release, for another when the source's
own version maps to it), else the cached wheel ``vllm-<version>-*.whl`` under
:func:`properties.core.sources.cache_dir`, which ``python -m properties.families.v1.upstream
fetch`` downloads (``--version``: 0.34.0, the default, 0.33.0 or 0.11.0).

Versions: a load's version is the one the source declares (a wheel's or a tree's
``*.dist-info/METADATA``, else the tree's ``vllm/_version.py``, parsed, never imported; see
:mod:`properties.families.v1.closure`), never the one asked for. Capabilities are detected from
the API whatever the version; the expected failures that apply (an entry's ``versions``) are a
supported release's, chosen by :func:`release_of`: a release itself; any other build of a minor
series the suite supports (``0.33.1.dev12+g...``, ``0.33.1``, ``0.34.0rc1``) that series'
release, since the xfails files are per minor series; a build newer than every supported
release the newest one before it (its known deviations are the best guess: a fixed one shows as
"no longer fails"). A version older than all of them, or one that cannot be read, maps to none,
and the report header says so (:func:`version_note`).

Supported releases: 0.34.0 (the newest, the default), 0.33.0 (the bundled pool's reference) and
0.11.0, the last release before the pool learnt
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
import re
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
    UpstreamError,
    UpstreamSourceInvalid,
    UpstreamSourceMissing,
    apply_patches,
    cache_dir,
    pip_download,
    with_packages,
)
from properties.families.v1 import stand_ins
from properties.families.v1.closure import Closure, ClosureError, Policy, Source, resolve

__all__ = [
    "DEFAULT_VERSION",
    "FETCH_COMMAND",
    "SOURCE_ENV",
    "SUPPORTED_VERSIONS",
    "Capabilities",
    "ClosureError",
    "Patch",
    "V1Modules",
    "cached_wheel",
    "capabilities",
    "fetch",
    "load_vllm_v1",
    "release_of",
    "source_version",
    "version_note",
]

DEFAULT_VERSION = "0.34.0"
SUPPORTED_VERSIONS = ("0.34.0", "0.33.0", "0.11.0")
FETCH_COMMAND = "python -m properties.upstream fetch vllm-v1"
SOURCE_ENV = "PREFIXCACHE_VLLM_V1_SOURCE"

# The block level's roots (relative to ``vllm``); the rest of the closure is resolved from them.
ROOTS = ("v1.core.kv_cache_utils", "v1.core.block_pool")

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
    real: tuple[str, ...] = ()  # the upstream modules executed from the source


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
    free_evict_first: bool = False  # free_blocks(..., evict_first=): cached blocks to the front
    unpin_blocks: bool = False  # unpin_blocks(blocks, on_reuse) (0.33)
    move_block_hashes: bool = False  # move_block_hashes(src, dst) (0.33)
    emit_cached_events: bool = False  # emit_cached_block_events(...) (0.33)
    hash_lookahead: bool = False  # BlockPool(..., num_hash_lookahead_tokens=) (0.34)
    # Detected and described; the block machine drives none of these yet (0.34 added all but
    # partial_replace, which 0.33 has):
    partial_replace: bool = False  # cache_partial_block(..., replace_existing_hashes=)
    hash_map_by_id: bool = False  # the hash map holds block ids per key, has clear()
    frontend_hashes: bool = False  # kv_cache_utils.frontend_block_hashes (hashes from the API)


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
        free_evict_first="evict_first" in inspect.signature(pool.free_blocks).parameters,
        unpin_blocks=callable(getattr(pool, "unpin_blocks", None)),
        move_block_hashes=callable(getattr(pool, "move_block_hashes", None)),
        emit_cached_events=callable(getattr(pool, "emit_cached_block_events", None)),
        hash_lookahead="num_hash_lookahead_tokens" in params,
        partial_replace=hasattr(pool, "cache_partial_block") and "replace_existing_hashes" in
        inspect.signature(pool.cache_partial_block).parameters,
        hash_map_by_id=hasattr(getattr(mods.block_pool, "BlockHashToBlockMap", None), "clear"),
        frontend_hashes=hasattr(utils, "frontend_block_hashes"),
    )


# --------------------------------------------------------------------------- #
# Sources
# --------------------------------------------------------------------------- #


def block_policy() -> Policy:
    """The block level's stand-ins: the engine plumbing of :data:`stand_ins.STUBS`; vLLM 0.11's
    monolithic ``vllm.utils`` (it imports torch), ``cbor2`` and 0.34's ``vllm.v1.token_buffer``
    (numpy) only when the real ones cannot load; torch is never imported."""
    return Policy(stubs=stand_ins.STUBS,
                  fallbacks={"vllm.utils": stand_ins.ENGINE_UTILS_STUB,
                             "cbor2": stand_ins.CBOR2_STUB,
                             "vllm.v1.token_buffer": stand_ins.TOKEN_BUFFER_STUB},
                  forbidden=frozenset({"torch"}))


def resolve_closure(source: Path, roots: Sequence[str] = ROOTS,
                    policy: Policy | None = None) -> Closure:
    """The import closure of ``roots`` (relative to ``vllm``) in the wheel or tree ``source``
    (see :mod:`properties.families.v1.closure`); raises ``ClosureError`` naming what is missing
    and the import chain."""
    src = Source(source, "vllm")
    try:
        return resolve(src, [f"vllm.{r}" for r in roots],
                       block_policy() if policy is None else policy)
    finally:
        src.close()


def plan_closure(closure: Closure, patches: Sequence[Patch] = ()) -> dict[str, Entry]:
    """The finder's plan for ``closure``, with textual ``patches`` applied to its real modules."""
    files = {name[len("vllm."):]: file for name, (file, _) in closure.real.items()}
    patched = apply_patches(files, patches, "vllm")
    entries: dict[str, Entry] = {
        name: Entry(pkg, file=patched[name[len("vllm."):]])
        for name, (_, pkg) in closure.real.items()}
    for name, build in closure.stubs.items():
        entries[name] = Entry(False, stub=build)
    return with_packages(entries)


def cached_wheel(version: str = DEFAULT_VERSION) -> Path | None:
    """The cached wheel of ``version``, if fetched."""
    found = sorted(cache_dir().glob(f"vllm-{version}-*.whl"))
    return found[0] if found else None


def source_version(source: Path) -> str:
    """The version the wheel or tree ``source`` declares, ``"<version>"`` (``"unknown"`` when
    it declares none; see :class:`properties.families.v1.closure.Source`)."""
    src = Source(source, "vllm")
    try:
        return src.version.split()[-1]
    finally:
        src.close()


_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def _triple(version: str) -> tuple[int, int, int] | None:
    found = _RELEASE.match(version.strip().removeprefix("v"))
    if found is None:
        return None
    return int(found[1]), int(found[2]), int(found[3] or 0)


def release_of(version: str, supported: Sequence[str] = SUPPORTED_VERSIONS) -> str | None:
    """The supported release whose expected failures apply to a source of ``version`` (see
    the module docstring): the release itself; else the supported release of the same minor
    series (a development, pre-, post- or patch build of it); else, for a build newer than every
    supported release, the newest one; else None (older than all, or not a version)."""
    if version in supported:
        return version
    own = _triple(version)
    if own is None:
        return None
    releases = sorted(((t, r) for r in supported if (t := _triple(r)) is not None),
                      reverse=True)
    for triple, release in releases:
        if triple[:2] == own[:2]:
            return release
    if releases and own > releases[0][0]:
        return releases[0][1]
    return None


def version_note(version: str, origin: str,
                 supported: Sequence[str] = SUPPORTED_VERSIONS) -> str:
    """What the report header says about a source's ``version`` (``""``: a supported
    release, nothing to say): a build mapped to a release, or a warning that expected failures
    listed for releases will not apply."""
    release = release_of(version, supported)
    if release == version:
        return ""
    if version in ("", "unknown"):
        return (f"WARNING: unknown: {origin} declares no version (no vllm-*.dist-info/METADATA, "
                "no __version__ in vllm/_version.py); expected failures listed for releases "
                "(\"versions\") do not apply")
    if release is None:
        return (f"WARNING: {version} maps to no supported release ({', '.join(supported)}); "
                "expected failures listed for releases (\"versions\") do not apply")
    own, rel = _triple(version), _triple(release)
    why = ("its minor series" if own is not None and rel is not None and own[:2] == rel[:2]
           else "the newest supported release before it")
    return (f"{version} is not a supported release: expected failures listed for releases "
            f"apply as for {release} ({why})")


def source_from_env(version: str) -> Path | None:
    """``$PREFIXCACHE_VLLM_V1_SOURCE`` when it is release ``version``'s source: for the
    default release whatever it declares (the default target runs any source as the version it
    declares), for another release when its declared version maps to that release
    (:func:`release_of`); else None (that release comes from its cached wheel)."""
    env = os.environ.get(SOURCE_ENV)
    if not env:
        return None
    path = Path(env).expanduser()
    if version == DEFAULT_VERSION:
        return path
    try:
        declared = source_version(path)
    except UpstreamSourceInvalid:
        return None  # neither a wheel nor a tree: the default release's load says so
    return path if release_of(declared) == version else None


def is_cached_wheel(origin: str) -> bool:
    """Whether ``origin`` (a load's) is a wheel of the cache (else a user-named source)."""
    path = Path(origin)
    return path.suffix == ".whl" and path.parent.resolve() == cache_dir().resolve()


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


def _execute(path: Path, patches: tuple[Patch, ...]) -> V1Modules:
    closure = resolve_closure(path)
    wanted = [r for r in (*ROOTS, "v1.core.kv_cache_metrics", "utils.hashing")
              if f"vllm.{r}" in closure.real]
    mods, stubbed = run_plan(plan_closure(closure, patches), closure.origin, wanted)
    utils = mods["v1.core.kv_cache_utils"]
    real_hashing = "utils.hashing" in mods
    hash_fn = mods["utils.hashing"].sha256 if real_hashing else stand_ins._sha256
    utils.init_none_hash(hash_fn)
    return V1Modules(
        block_pool=mods["v1.core.block_pool"],
        kv_cache_utils=utils,
        kv_cache_metrics=mods.get("v1.core.kv_cache_metrics"),
        hashing=mods.get("utils.hashing"),
        version=closure.version,
        origin=closure.origin,
        stubbed=stubbed,
        patches=patches,
        real=tuple(sorted(closure.real)),
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
            _LOADED[key] = _execute(path, key[1])
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
    print(f"real:    {', '.join(mods.real)}")
    print(f"stubbed: {', '.join(mods.stubbed)}")
    print(f"caps:    {capabilities(mods)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
