"""Targets: which allocator the suite judges, and what it claims.

A target spec is ``module:callable`` naming a factory with the signature of upstream's
``CpuGpuBlockAllocator.create``:
``(allocator_type, num_gpu_blocks, num_cpu_blocks, block_size) -> allocator``.
Capabilities are detected from the allocator's API and from claims its package declares in a
``PREFIXCACHE_CLAIMS`` mapping (``atomic``, ``typed_errors``, ``lru``); users can switch features
off (``--disable-feature``).

Each target carries its per-step time limit (``step_timeout`` seconds, ``None``: no limit):
``--step-timeout``, else ``$PREFIXCACHE_STEP_TIMEOUT``, else :data:`DEFAULT_STEP_TIMEOUT`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from models.families.v0.capabilities import Capabilities, Config, Generation
from properties.families.v0.adapter import FamilyAdapter

DEFAULT_SPEC = "prefixcache.cpu_gpu_block_allocator:CpuGpuBlockAllocator.create"
ENV_VAR = "PREFIXCACHE_ALLOCATOR"
TIMEOUT_ENV_VAR = "PREFIXCACHE_STEP_TIMEOUT"
DEFAULT_STEP_TIMEOUT = 10.0


class TargetError(Exception):
    """The target spec cannot be resolved or the factory does not behave like one."""


def resolve(spec: str) -> Callable[..., Any]:
    """The callable named by ``module:attr.path``."""
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise TargetError(f"target spec {spec!r} is not of the form module:callable")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(f"cannot import {module_name!r} for target {spec!r}: {exc}") from exc
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise TargetError(f"{spec!r}: {part!r} not found") from exc
    if not callable(obj):
        raise TargetError(f"{spec!r} is not callable")
    return obj  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Target:
    """A resolved target: its factory, identity, capabilities and error types."""

    spec: str
    factory: Callable[..., Any]
    caps: Capabilities
    name: str
    version: str
    misuse_types: tuple[type[BaseException], ...] = ()
    allocator_type: str = "prefix_caching"
    factory_kwargs: tuple[tuple[str, Any], ...] = ()
    step_timeout: float | None = DEFAULT_STEP_TIMEOUT
    extra_key_function: str | None = None  # claim: renders ExtraKey values (module:callable)

    def create(self, config: Config) -> Any:
        """A fresh allocator shaped by ``config``."""
        return self.factory(self.allocator_type, config.num_gpu_blocks, config.num_cpu_blocks,
                            config.block_size, **dict(self.factory_kwargs))

    def adapter(self, config: Config) -> FamilyAdapter:
        return FamilyAdapter(self.create(config), config.block_size, self.misuse_types,
                             self.extra_key_function)

    def describe(self) -> str:
        caps = self.caps
        on = [n for n in ("prefix_caching", "lru", "swap", "extra_keys", "atomic",
                          "typed_errors", "introspection") if getattr(caps, n)]
        return (f"{self.name} {self.version} ({self.spec}, {self.allocator_type}); "
                f"API {caps.generation.value}; features: {', '.join(on) or 'none'}")

    def with_kwargs(self, **kwargs: Any) -> Target:
        """The same target with extra factory keyword arguments (e.g. an injected hash)."""
        return replace(self, factory_kwargs=(*self.factory_kwargs, *kwargs.items()))

    def with_step_timeout(self, seconds: float | None) -> Target:
        """The same target with another per-step time limit (``None`` or ``<= 0``: none)."""
        return replace(self, step_timeout=seconds if seconds is not None and seconds > 0
                       else None)


_session_step_timeout: float | str | None = None


def set_session_step_timeout(value: float | str | None) -> None:
    """The limit every target loaded from now on gets unless given one (the session's
    ``--step-timeout``; ``None``: back to the environment or the default)."""
    global _session_step_timeout
    step_timeout_setting(value)
    _session_step_timeout = value


def step_timeout_setting(value: float | str | None = None) -> float | None:
    """The per-step time limit: ``value`` if given, else the session's, else
    ``$PREFIXCACHE_STEP_TIMEOUT``, else the default; ``0`` or less disables it. A value that is
    not a number is a :class:`TargetError`."""
    if value is None:
        value = _session_step_timeout
    if value is None:
        value = os.environ.get(TIMEOUT_ENV_VAR) or DEFAULT_STEP_TIMEOUT
    try:
        seconds = float(value)
    except ValueError as exc:
        raise TargetError(f"step timeout {value!r} is not a number of seconds") from exc
    return seconds if seconds > 0 else None


def _package_of(factory: Callable[..., Any]) -> str:
    module = getattr(factory, "__module__", None) or ""
    return module.split(".", 1)[0]


def _claims(factory: Callable[..., Any], package: str) -> Mapping[str, Any]:
    """Claims from the factory's module hook ``prefixcache_claims(factory)``, else the
    package's ``PREFIXCACHE_CLAIMS`` mapping, else none."""
    module = importlib.import_module(getattr(factory, "__module__", package))
    hook = getattr(module, "prefixcache_claims", None)
    claims: Any = hook(factory) if callable(hook) else None
    if claims is None:
        claims = getattr(importlib.import_module(package), "PREFIXCACHE_CLAIMS", {})
    return claims if isinstance(claims, Mapping) else {}


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        module = importlib.import_module(package)
        return str(getattr(module, "__version__", "unknown"))


def load_target(
    spec: str | None = None,
    *,
    allocator_type: str = "prefix_caching",
    disable: Iterable[str] = (),
    step_timeout: float | str | None = None,
) -> Target:
    """Resolve ``spec`` (default: ``$PREFIXCACHE_ALLOCATOR``, else the bundled allocator) and
    detect its capabilities on a tiny instance. Whatever the probe instance does wrong
    (raises, returns something that is not an allocator) is a :class:`TargetError`."""
    spec = spec or os.environ.get(ENV_VAR) or DEFAULT_SPEC
    factory = resolve(spec)
    package = _package_of(factory)
    claims = _claims(factory, package)
    misuse = tuple(_resolve_types(claims.get("misuse_errors", ())))
    try:
        extra_key_function = claims.get("extra_key_function")
        probe = FamilyAdapter(factory(allocator_type, 2, 2, 2), 2, misuse, extra_key_function)
        introspection = probe.introspect() is not None
        tracker_switch = probe.tracker_caching_switch()
    except Exception as exc:  # a factory that cannot build a tiny pool is not a target
        raise TargetError(f"{spec!r} failed to create a 2+2-block allocator: "
                          f"{type(exc).__name__}: {exc}") from exc
    if probe.has_aphrodite_api and probe.has_vllm_api:
        generation = Generation.BOTH
    elif probe.has_vllm_api:
        generation = Generation.VLLM
    else:
        generation = Generation.APHRODITE
    prefix = allocator_type == "prefix_caching"
    caps = Capabilities(
        prefix_caching=prefix,
        lru=prefix and bool(claims.get("lru", True)),
        swap=True,
        extra_keys=probe.has_extra_hash,
        extra_key_fields=probe.extra_key_fields,
        key_builder=probe.extra_key_function is not None,
        generation=generation,
        atomic=bool(claims.get("atomic", False)),
        typed_errors=bool(claims.get("typed_errors", False)) and bool(misuse),
        introspection=introspection,
        tracker_caching_switch=tracker_switch,
    )
    disabled = tuple(disable)
    if disabled:
        caps = caps.without(*disabled)
    version = str(claims.get("version") or _version(package))
    return Target(spec, factory, caps, str(claims.get("name", package)), version, misuse,
                  allocator_type, step_timeout=step_timeout_setting(step_timeout),
                  extra_key_function=extra_key_function)


def _resolve_types(specs: Iterable[Any]) -> Iterable[type[BaseException]]:
    for item in specs:
        if isinstance(item, type) and issubclass(item, BaseException):
            yield item
        elif isinstance(item, str):
            obj = resolve(item) if ":" in item else None
            if isinstance(obj, type) and issubclass(obj, BaseException):
                yield obj
