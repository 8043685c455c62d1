"""Offload targets: which manager the offload family judges, how it is built, what it offers.

A target spec is ``module:callable``: a manager class with the CPU tier's API
(``prepare_store``, ``complete_store``, ``prepare_load``, ``complete_load``, ``lookup``,
``take_events``; the bundled ``prefixcache.v1.kv_offload.cpu.manager:CPUOffloadingManager``), or
a function annotated to return an :class:`OffloadTarget` (``properties.upstream:
vllm_cpu_offload`` and its siblings, the zoo's mutants). Capabilities are detected from the API,
never from a version.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from properties.core.sources import UpstreamSourceMissing
from properties.core.targets import TargetError, resolve
from properties.families.offload import upstream

DEFAULT_SPEC = "prefixcache.v1.kv_offload.cpu.manager:CPUOffloadingManager"
ENV_VAR = "PREFIXCACHE_OFFLOAD_MANAGER"
#: The methods that make a class an offload manager (detection reads the API only).
MANAGER_METHODS = ("prepare_store", "complete_store", "prepare_load", "complete_load",
                   "lookup", "take_events")
POLICIES = ("lru", "arc")


@dataclass(frozen=True)
class OffloadCaps:
    """What a manager offers, detected from its API.

    ``per_key_lookup``: ``lookup(key, req_context)`` answers HIT / HIT_PENDING / MISS (else
    ``lookup(hashes)`` counts the leading ready ones, 0.11.0); ``req_context``: calls take a
    request context and the manager hears of requests finishing; ``policies``: cache policies
    by name; ``store_threshold``: the constructor takes the admission threshold;
    ``reset_cache`` / ``on_reset_flushed``: the hooks exist; ``free_count``: a public
    ``get_num_free_chunks``."""

    per_key_lookup: bool = True
    req_context: bool = True
    policies: tuple[str, ...] = POLICIES
    store_threshold: bool = True
    reset_cache: bool = True
    on_reset_flushed: bool = False
    free_count: bool = False

    @property
    def legacy(self) -> bool:
        return not self.req_context


@dataclass(frozen=True)
class OffloadTarget:
    """A manager factory with its request-context type, capabilities and the script lines
    that build the same manager (they define ``make(num_chunks, **kwargs)`` and
    ``ReqContext``).

    ``make(num_chunks, cache_policy=, enable_events=, store_threshold=, max_tracker_size=)``
    builds a manager (a legacy manager takes ``enable_events`` only). ``policy``: the one
    cache policy this target is fixed to (None: the allocator type chooses)."""

    name: str
    version: str
    make: Callable[..., Any]
    req_context_cls: Any
    caps: OffloadCaps
    setup: tuple[str, ...]
    policy: str | None = None
    spec: str = ""
    misuse_types: tuple[type[BaseException], ...] = (AssertionError,)

    def build(self, num_chunks: int, policy: str, events: bool, store_threshold: int,
              max_tracker_size: int) -> Any:
        if self.caps.legacy:
            return self.make(num_chunks, enable_events=events)
        kwargs: dict[str, Any] = {"cache_policy": policy, "enable_events": events}
        if self.caps.store_threshold:
            kwargs.update(store_threshold=store_threshold, max_tracker_size=max_tracker_size)
        return self.make(num_chunks, **kwargs)

    def describe(self) -> str:
        c = self.caps
        features = [n for n in ("per_key_lookup", "req_context", "store_threshold",
                                "reset_cache", "on_reset_flushed", "free_count")
                    if getattr(c, n)]
        where = f"{self.spec}, " if self.spec else ""
        return (f"{self.name} {self.version} ({where}CPU offload manager; policies "
                f"{', '.join(c.policies)}); features: {', '.join(features) or 'none'}")


def class_caps(cls: type) -> OffloadCaps:
    """The capabilities of a manager class of the 0.33.0+ API (read from its signatures)."""
    init = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    manager: Any = cls
    lookup = inspect.signature(manager.lookup).parameters
    return OffloadCaps(
        per_key_lookup="key" in lookup, req_context="req_context" in lookup,
        policies=POLICIES if "cache_policy" in init else ("lru",),
        store_threshold="store_threshold" in init and "max_tracker_size" in init,
        reset_cache=callable(getattr(cls, "reset_cache", None)),
        on_reset_flushed=callable(getattr(cls, "on_reset_flushed", None)),
        free_count=callable(getattr(cls, "get_num_free_chunks", None)))


def class_target(cls: type, spec: str, setup: tuple[str, ...] = (), name: str = "",
                 version: str = "") -> OffloadTarget:
    """A target of a manager class; its module (or a module it imports from) names the
    request context type ``ReqContext``. ``setup``: script lines binding ``Manager`` to the
    class (default: imported from ``spec``)."""
    module = sys.modules.get(cls.__module__)
    req_context = getattr(module, "ReqContext", None)
    if req_context is None:
        raise TargetError(f"{spec!r}: its module {cls.__module__} names no ReqContext")
    caps = class_caps(cls)
    if not caps.req_context:
        raise TargetError(f"{spec!r}: lookup takes no req_context (not the 0.33.0+ API)")
    mod, _, attr = spec.partition(":")
    lines = setup or (f"from {mod} import {attr} as Manager",)
    lines += ("import sys",
              "ReqContext = sys.modules[Manager.__module__].ReqContext",
              "make = Manager")
    misuse = tuple(t for t in (getattr(module, n, None) for n in (
        "KeyNotLoadableError", "LoadNotPreparedError", "StoreNotPendingError",
        "OffloadArgumentError", "RequestFinishedError")) if isinstance(t, type))
    return OffloadTarget(name or cls.__qualname__, version or "bundled", cls, req_context, caps,
                         lines, spec=spec, misuse_types=misuse or (AssertionError,))


def upstream_target(version: str, policy: str | None = None) -> OffloadTarget:
    """A release's manager from its cached wheel (fetched on first use)."""
    from_env = version == upstream.DEFAULT_VERSION and upstream.SOURCE_ENV in os.environ
    if upstream.cached_wheel(version) is None and not from_env:
        try:
            upstream.fetch(version)
        except UpstreamSourceMissing as exc:
            raise UpstreamSourceMissing(
                f"vllm {version} is not cached and fetching it failed: {exc}; fetch it with "
                f"`{upstream.FETCH_COMMAND} --version {version}`") from exc
    mods = upstream.load_vllm_offload(version=version)
    found = upstream.capabilities(mods)
    legacy = found.generation == upstream.LRU_BACKEND
    caps = OffloadCaps(per_key_lookup=found.per_key_lookup, req_context=found.req_context,
                       policies=found.policies, store_threshold=found.store_threshold,
                       reset_cache=found.reset_cache, on_reset_flushed=False,
                       free_count=False)

    def make(num_chunks: int, **kwargs: Any) -> Any:
        return upstream.new_manager(mods, num_chunks, **kwargs)

    setup = ("from properties.families.offload.upstream import load_vllm_offload, new_manager",
             f"mods = load_vllm_offload(version={version!r})",
             "ReqContext = None" if legacy else "ReqContext = mods.types.ReqContext",
             "def make(num_chunks, **kwargs):",
             "    return new_manager(mods, num_chunks, **kwargs)")
    return OffloadTarget("vllm", version, make, None if legacy else mods.types.ReqContext,
                         caps, setup, policy=policy)


def of_spec(spec: str) -> OffloadTarget:
    """The target ``spec`` names (a manager class, or a function returning a target)."""
    obj = resolve(spec)
    if isinstance(obj, type):
        missing = [m for m in MANAGER_METHODS if not callable(getattr(obj, m, None))]
        if missing:
            raise TargetError(f"{spec!r} is not an offload manager: it has no "
                              f"{', '.join(missing)}")
        return class_target(obj, spec)
    try:
        made = obj()
    except UpstreamSourceMissing as exc:
        raise TargetError(f"{spec!r}: {exc}") from exc
    except Exception as exc:
        raise TargetError(f"{spec!r} failed to build its target: {type(exc).__name__}: "
                          f"{exc}") from exc
    if not isinstance(made, OffloadTarget):
        raise TargetError(f"{spec!r} returned a {type(made).__name__}, not an OffloadTarget")
    return made


# ---------------------------------------------------------------- upstream releases


def vllm_cpu_offload() -> OffloadTarget:
    """The newest supported release's ``CPUOffloadingManager`` (vLLM 0.34.0); the policy is
    the allocator type (``lru``, the default, or ``arc``)."""
    return upstream_target(upstream.DEFAULT_VERSION)


def vllm_cpu_offload_arc() -> OffloadTarget:
    """vLLM 0.34.0's ``CPUOffloadingManager`` under its ``arc`` policy."""
    return upstream_target(upstream.DEFAULT_VERSION, "arc")


def vllm_v033_cpu_offload() -> OffloadTarget:
    """vLLM 0.33.0's ``CPUOffloadingManager`` (``lru`` or ``arc``)."""
    return upstream_target("0.33.0")


def vllm_v011_cpu_offload() -> OffloadTarget:
    """vLLM 0.11.0's ``LRUOffloadingManager`` over a ``CPUBackend`` (LRU only, no request
    contexts, no reset)."""
    return upstream_target("0.11.0")
