"""v1 targets: which BlockPool the v1 family judges, its hasher and what it claims.

A pool spec is ``module:callable``. The callable is either a ``BlockPool`` class (its
package's sibling ``kv_cache_utils`` module supplies the request hasher) or a function
returning a :class:`PoolTarget`. Capabilities are detected from the API
(:func:`properties.families.v1.upstream.capabilities`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from models.families.v1.pool_model import ModelCaps, PoolConfig
from properties.core.sources import UpstreamSourceInvalid, UpstreamSourceMissing
from properties.core.targets import TargetError, resolve, version_of
from properties.families.v1 import upstream

DEFAULT_SPEC = "prefixcache.v1.core.block_pool:BlockPool"
UPSTREAM_SPEC = "properties.upstream:vllm_v1_block_pool"
ENV_VAR = "PREFIXCACHE_POOL"


@dataclass(frozen=True)
class PoolTarget:
    """A pool class with its release's hashing module, capabilities and claims.

    ``misuse_types``: the typed errors the target claims for misuse (empty: it claims none,
    so misuse is only probed in isolation). ``atomic``: it claims failure atomicity, so a
    misuse probe that changes its state is an ``ATOMIC`` violation, not only a finding.
    """

    name: str
    version: str
    pool_cls: Any
    kv_cache_utils: ModuleType
    hash_fn: Callable[[Any], bytes]
    caps: upstream.Capabilities
    misuse_types: tuple[type[BaseException], ...] = ()
    atomic: bool = False
    spec: str = ""  # the spec it was loaded from (reports, reproducers)
    step_timeout: float | None = None  # per-step time limit in seconds (None: no limit)
    # A vLLM load's: the supported release whose expected failures apply (``""``: none, or not
    # a vLLM load; :func:`upstream.release_of`), what the header says about the version, and
    # the source it came from when that is not the release's cached wheel (a tree or a wheel
    # named by $PREFIXCACHE_VLLM_V1_SOURCE; reproducers load it by path).
    release: str = ""
    version_note: str = ""
    source: str = ""

    #: What the core's signatures call the allocator type: a pool has one.
    allocator_type: ClassVar[str] = "block_pool"

    @property
    def model_caps(self) -> ModelCaps:
        c = self.caps
        return ModelCaps(unhashed_free_to_front=c.unhashed_free_to_front,
                         partial_blocks=c.partial_blocks, evict_blocks=c.evict_blocks,
                         hash_block_size=c.hash_block_size)

    def create(self, config: PoolConfig) -> Any:
        # num_hash_lookahead_tokens only when set: a release without it is never given it.
        extra = {"num_hash_lookahead_tokens": config.lookahead} if config.lookahead else {}
        if self.caps.hash_block_size:
            return self.pool_cls(config.num_blocks, config.caching, config.hash_block_size,
                                 enable_kv_cache_events=config.events, **extra)
        return self.pool_cls(config.num_blocks, config.caching,
                             enable_kv_cache_events=config.events, **extra)

    def hasher(self, hash_block_size: int, lookahead: int = 0) -> Callable[[Any], list[bytes]]:
        """The release's request hasher; ``lookahead``: ``num_hash_lookahead_tokens``."""
        fn: Callable[[Any], list[bytes]]
        extra = {"num_hash_lookahead_tokens": lookahead} if lookahead else {}
        fn = self.kv_cache_utils.get_request_block_hasher(hash_block_size, self.hash_fn, **extra)
        return fn

    def describe(self) -> str:
        """One line: name, version, spec, API and detected features."""
        c = self.caps
        features = [n for n in ("hash_block_size", "partial_blocks", "evict_blocks",
                                "unhashed_free_to_front", "touch_per_group",
                                "keys_prompt_embeds", "skips_null_blocks", "free_evict_first",
                                "unpin_blocks", "move_block_hashes", "emit_cached_events",
                                "hash_lookahead",
                                "partial_replace", "hash_map_by_id", "frontend_hashes")
                    if getattr(c, n)]
        claims = "typed errors" if self.misuse_types else "no typed errors"
        where = f"{self.spec}, " if self.spec else ""
        source = f" from {self.source}" if self.source else ""
        return (f"{self.name} {self.version or 'unversioned'} ({where}v1 BlockPool{source}); "
                f"features: {', '.join(features) or 'none'}; {claims}")


def from_modules(mods: upstream.V1Modules, name: str = "vllm") -> PoolTarget:
    """The target of a load: its version is the one its source declares."""
    version = mods.version.split()[-1]
    return PoolTarget(name=name, version=version,
                      pool_cls=mods.block_pool.BlockPool, kv_cache_utils=mods.kv_cache_utils,
                      hash_fn=upstream.hash_function(mods), caps=upstream.capabilities(mods),
                      release=upstream.release_of(version) or "",
                      version_note=upstream.version_note(version, mods.origin),
                      source="" if upstream.is_cached_wheel(mods.origin) else mods.origin)


_FETCH_FAILED: dict[str, UpstreamSourceMissing] = {}


def _release(version: str) -> PoolTarget:
    """A release's pool; its wheel is fetched into the cache on first use (pip, no
    dependencies), an unreachable index is an ``UpstreamSourceMissing`` naming the command."""
    if upstream.cached_wheel(version) is None and not upstream.source_from_env(version):
        if version in _FETCH_FAILED:  # one attempt per process: the index stays unreachable
            raise _FETCH_FAILED[version]
        try:
            upstream.fetch(version)
        except UpstreamSourceMissing as exc:
            _FETCH_FAILED[version] = UpstreamSourceMissing(
                f"vllm {version} is not cached and fetching it failed (is the package index "
                f"reachable?): {exc}; fetch it with `{upstream.FETCH_COMMAND} --version "
                f"{version}` or set ${upstream.SOURCE_ENV} to a wheel or source tree")
            raise _FETCH_FAILED[version] from exc
    target = from_modules(upstream.load_vllm_v1(version=version))
    env = os.environ.get(upstream.SOURCE_ENV)
    if env and upstream.source_from_env(version) is None:  # another release's source: say so
        try:
            declared = f"declares version {upstream.source_version(Path(env).expanduser())}"
        except UpstreamSourceInvalid as exc:
            declared = f"cannot be read ({exc})"
        target = replace(target, version_note=(
            f"${upstream.SOURCE_ENV} ({env}) {declared}, not a {version} build: this target "
            "runs the cached wheel"))
    return target


def vllm_v1_block_pool() -> PoolTarget:
    """The newest supported release's BlockPool (:data:`upstream.DEFAULT_VERSION`, 0.34.0) from
    its wheel (fetched on first use: ``python -m properties.upstream fetch vllm-v1``), or the
    pool of ``$PREFIXCACHE_VLLM_V1_SOURCE`` at the version that source declares."""
    return _release(upstream.DEFAULT_VERSION)


def vllm_v033_block_pool() -> PoolTarget:
    """vLLM 0.33.0's BlockPool, the bundled pool's reference (``... --version 0.33.0``)."""
    return _release("0.33.0")


def vllm_v034_block_pool() -> PoolTarget:
    """vLLM 0.34.0's BlockPool (``... fetch vllm-v1 --version 0.34.0``)."""
    return _release("0.34.0")


def vllm_v011_block_pool() -> PoolTarget:
    """vLLM 0.11.0's BlockPool (``... fetch vllm-v1 --version 0.11.0``)."""
    return _release("0.11.0")


def patched_vllm_pool(name: str, patches: Sequence[upstream.Patch],
                      version: str = "0.33.0") -> PoolTarget:
    """A broken variant: upstream's source with textual ``patches`` applied at load time."""
    return from_modules(upstream.load_vllm_v1(version=version, patches=patches), name=name)


def _from_class(cls: Any) -> PoolTarget:
    package = cls.__module__.rpartition(".")[0]
    utils = sys.modules.get(f"{package}.kv_cache_utils") or importlib.import_module(
        f"{package}.kv_cache_utils")
    hashing = getattr(utils, "sha256", None) or getattr(utils, "hash_fn", None)
    if hashing is None:
        raise TargetError(f"{package}.kv_cache_utils offers no sha256 hash function")
    claims = _claims(cls.__module__)
    mods = upstream.V1Modules(block_pool=sys.modules[cls.__module__], kv_cache_utils=utils,
                              kv_cache_metrics=None, hashing=None, version="", origin=package,
                              stubbed=())
    top = package.split(".")[0]
    try:
        installed = version_of(top)
    except ImportError:
        installed = ""
    return PoolTarget(name=top, version=str(claims.get("version", installed)),
                      pool_cls=cls, kv_cache_utils=utils, hash_fn=hashing,
                      caps=upstream.capabilities(mods),
                      misuse_types=tuple(claims.get("misuse_errors", ())),
                      atomic=bool(claims.get("atomic", False)))


def _claims(module: str) -> dict[str, Any]:
    """The ``PREFIXCACHE_CLAIMS`` mapping of ``module`` or of the nearest package above it that
    declares one (the bundled pool's are ``prefixcache.v1``'s); none: no claims."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        mod = sys.modules.get(".".join(parts[:i]))
        if mod is None:
            try:
                mod = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
        claims = getattr(mod, "PREFIXCACHE_CLAIMS", None)
        if isinstance(claims, dict):
            return claims
    return {}


def load(spec: str, step_timeout: float | None = None) -> PoolTarget:
    """Resolve ``spec`` (see the module docstring) to a target carrying ``spec`` and the
    per-step time limit ``step_timeout`` (seconds, None: no limit)."""
    obj = resolve(spec)
    target = _from_class(obj) if isinstance(obj, type) else obj()
    if not isinstance(target, PoolTarget):
        raise TargetError(f"{spec!r} returned {type(target).__name__}, not a PoolTarget")
    return replace(target, spec=spec, step_timeout=step_timeout)


def default_spec() -> str:
    """The bundled pool when importable, else the newest release's (until the bundled one
    lands)."""
    try:
        importlib.import_module(DEFAULT_SPEC.partition(":")[0])
    except ImportError:
        return UPSTREAM_SPEC
    return DEFAULT_SPEC
