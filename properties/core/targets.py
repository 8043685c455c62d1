"""Targets: which allocator the suite judges, and what it claims.

A target spec is ``module:callable``. Which family's API it speaks is detected or named
(:func:`properties.core.family.select`); the family resolves it, detects its capabilities
(from its API, and from claims its package declares: a ``PREFIXCACHE_CLAIMS`` mapping or a
``prefixcache_claims(factory)`` hook, read by :func:`claims_of`), and builds allocators of it.
Users can switch features off (``--disable-feature``).

Each target carries its per-step time limit (``step_timeout`` seconds, ``None``: no limit):
``--step-timeout``, else ``$PREFIXCACHE_STEP_TIMEOUT``, else :data:`DEFAULT_STEP_TIMEOUT`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from properties.core import family as families
from properties.core.roles import Building

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
    """A resolved target: its factory, identity, capabilities (the family's type) and error
    types; ``family`` names the family that builds and judges it, ``allocator_type`` the
    variant of it the family builds (:class:`properties.core.roles.Variants`; empty for a
    family with one), ``description`` the line reports show (the family writes it), ``claims``
    what the target's package declares about itself (:func:`claims_of`)."""

    spec: str
    factory: Callable[..., Any]
    caps: Any
    name: str
    version: str
    family: str
    allocator_type: str = ""
    description: str = ""
    misuse_types: tuple[type[BaseException], ...] = ()
    factory_kwargs: tuple[tuple[str, Any], ...] = ()
    step_timeout: float | None = DEFAULT_STEP_TIMEOUT
    claims: Mapping[str, Any] = field(default_factory=dict)
    # The release an expected failure's ``versions`` are matched against ("": ``version``),
    # e.g. 0.33.0 for a development build 0.33.1.dev12+g...; and what the report header says
    # about the version ("": nothing to say), e.g. that it could not be read.
    release: str = ""
    version_note: str = ""

    @property
    def xfails_release(self) -> str:
        """The release whose expected failures apply (``release``, else ``version``)."""
        return self.release or self.version
    # Optional judge components the family detected and runs on this target (an xfails
    # entry's ``requires``), e.g. the v1 pool's ``dynamo-router``.
    judges: frozenset[str] = frozenset()

    @property
    def family_object(self) -> families.Family:
        return families.by_name(self.family)

    def create(self, config: Any) -> Any:
        """A fresh allocator shaped by ``config`` (a family that builds by hand:
        :class:`properties.core.roles.Building`)."""
        return self._builder().create(self, config)

    def adapter(self, config: Any) -> Any:
        """The family's adapter around a fresh allocator shaped by ``config``."""
        return self._builder().adapter(self, config)

    def _builder(self) -> Building:
        family = self.family_object
        if not isinstance(family, Building):
            raise TargetError(f"family {self.family!r} builds allocators only inside its judge")
        return family

    def describe(self) -> str:
        return self.description or f"{self.name} {self.version} ({self.spec})"

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


def module_of(factory: Callable[..., Any], spec: str = "") -> str:
    """The factory's module: its ``__module__``, else the module part of the ``spec`` it was
    resolved from (a compiled method, e.g. mypyc's, has no ``__module__``)."""
    return getattr(factory, "__module__", None) or spec.partition(":")[0]


def package_of(factory: Callable[..., Any], spec: str = "") -> str:
    return module_of(factory, spec).split(".", 1)[0]


def claims_of(factory: Callable[..., Any], spec: str = "") -> Mapping[str, Any]:
    """Claims from the factory's module hook ``prefixcache_claims(factory)``, else the
    package's ``PREFIXCACHE_CLAIMS`` mapping, else none."""
    module = importlib.import_module(module_of(factory, spec))
    hook = getattr(module, "prefixcache_claims", None)
    claims: Any = hook(factory) if callable(hook) else None
    if claims is None:
        package = importlib.import_module(package_of(factory, spec))
        claims = getattr(package, "PREFIXCACHE_CLAIMS", {})
    return claims if isinstance(claims, Mapping) else {}


def version_of(package: str) -> str:
    """The installed distribution's version, else the package's ``__version__``."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        module = importlib.import_module(package)
        return str(getattr(module, "__version__", "unknown"))


def load_target(
    spec: str | None = None,
    *,
    family: str | None = None,
    allocator_type: str | None = None,
    disable: Iterable[str] = (),
    step_timeout: float | str | None = None,
) -> Target:
    """Resolve ``spec`` (default: ``$PREFIXCACHE_ALLOCATOR``, else the family's bundled
    allocator) through its family (``family`` if named, else detected) and detect its
    capabilities (:meth:`properties.core.family.Family.load_target`). A target that cannot
    be built is a :class:`TargetError`."""
    spec = spec or os.environ.get(ENV_VAR) or None
    options = families.TargetOptions(allocator_type or None, tuple(disable), step_timeout)
    return families.select(spec, family).load_target(spec, options)


def speaks(spec_or_factory: str | Callable[..., Any], default_spec: str,
           methods: Iterable[str], returns: type | None) -> bool:
    """Whether a target spec (or the callable it names) speaks a family's API, judged without
    building anything: ``default_spec`` itself; a class with every one of ``methods`` (none
    given: no class is); or a callable annotated to return ``returns``. A spec that does not
    resolve speaks no family's API."""
    obj: Any = spec_or_factory
    if isinstance(obj, str):
        if obj == default_spec:
            return True
        try:
            obj = resolve(obj)
        except (TargetError, ImportError):
            return False
    names = tuple(methods)
    if isinstance(obj, type):
        return bool(names) and all(callable(getattr(obj, m, None)) for m in names)
    if returns is None or not callable(obj):
        return False
    try:
        annotation = inspect.signature(obj).return_annotation
    except (TypeError, ValueError):
        return False
    return annotation is returns or annotation == returns.__name__


def resolve_types(specs: Iterable[Any]) -> Iterable[type[BaseException]]:
    """The exception types named in ``specs`` (types, or ``module:attr`` strings)."""
    yield from _resolve_types(specs)


def _resolve_types(specs: Iterable[Any]) -> Iterable[type[BaseException]]:
    for item in specs:
        if isinstance(item, type) and issubclass(item, BaseException):
            yield item
        elif isinstance(item, str):
            obj = resolve(item) if ":" in item else None
            if isinstance(obj, type) and issubclass(obj, BaseException):
                yield obj


def __getattr__(name: str) -> Any:
    if name == "DEFAULT_SPEC":  # the default family's bundled allocator, looked up when read
        return families.default().default_spec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
