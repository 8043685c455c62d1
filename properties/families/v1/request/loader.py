"""Load vLLM v1's real ``KVCacheManager`` (with its coordinators, single-type managers and spec
classes) from a vllm wheel, with the CPU build of torch and only the engine packages stubbed.

This is the block level's loader (:mod:`properties.families.v1.upstream`: same source lookup, plan,
finder and isolation) with a wider module list, the stand-ins of
:mod:`properties.families.v1.request.stand_ins`, and one step the block level has no need for: the
spec registry is filled while the plan is installed (upstream fills it lazily on first use, by an
import that would otherwise escape the isolation). torch comes from the environment; without it,
:func:`load_manager` raises :class:`TorchMissing` (install the ``v1-manager`` extra).

Supported: 0.34.0 (the default) and 0.33.0 (the spec registry and the manager API this level
drives); the closure is resolved from :data:`ROOTS` as at the block level.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from properties.core.sources import UpstreamError, UpstreamSourceInvalid
from properties.families.v1 import upstream
from properties.families.v1.closure import Policy
from properties.families.v1.request import stand_ins

__all__ = ["MANAGER_VERSIONS", "ManagerModules", "TorchMissing", "load_manager",
           "torch_available"]

MANAGER_VERSIONS = ("0.34.0", "0.33.0")
TORCH_REQUIREMENT = "torch==2.13.0"  # the CPU build; the `v1-manager` extra

# The manager level's roots (relative to ``vllm``); the rest of the closure is resolved from them
# (:func:`properties.families.v1.upstream.resolve_closure`).
ROOTS = ("v1.core.kv_cache_utils", "v1.core.block_pool", "v1.kv_cache_interface",
         "v1.kv_cache_spec_registry", "v1.core.single_type_kv_cache_manager",
         "v1.core.kv_cache_coordinator", "v1.core.kv_cache_manager")


def manager_policy() -> Policy:
    """The block level's policy with the manager's stand-ins (the spec modules are real here,
    and torch is allowed)."""
    block = upstream.block_policy()
    return Policy(stubs=stand_ins.STUBS, fallbacks=block.fallbacks)


class TorchMissing(UpstreamError):
    """The manager's spec classes carry torch dtypes and torch is not installed."""


@dataclass(frozen=True)
class ManagerModules:
    """The modules of one manager load (fresh objects, apart from any block-level load)."""

    kv_cache_manager: ModuleType
    kv_cache_coordinator: ModuleType
    single_type: ModuleType
    kv_cache_interface: ModuleType
    block_pool: ModuleType
    kv_cache_utils: ModuleType
    hashing: ModuleType
    version: str
    origin: str
    stubbed: tuple[str, ...]
    patches: tuple[upstream.Patch, ...] = ()
    real: tuple[str, ...] = ()  # the upstream modules executed from the source

    def hash_fn(self) -> Any:
        return self.hashing.sha256


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


_LOCK = threading.RLock()
_LOADED: dict[tuple[str, tuple[upstream.Patch, ...]], ManagerModules] = {}


def _fill_registry(mods: dict[str, ModuleType]) -> None:
    mods["v1.kv_cache_spec_registry"].KVCacheSpecRegistry._ensure_registered(None)


def load_manager(source: str | os.PathLike[str] | None = None, *,
                 version: str = upstream.DEFAULT_VERSION,
                 patches: tuple[upstream.Patch, ...] = ()) -> ManagerModules:
    """Load the manager modules of ``version`` (source lookup as the block level's)."""
    if not torch_available():
        raise TorchMissing(f"the v1 manager's spec classes need torch: pip install "
                           f"'{TORCH_REQUIREMENT}' (the CPU build; extra `v1-manager`)")
    if version not in MANAGER_VERSIONS:
        raise UpstreamSourceInvalid(f"the manager level supports {MANAGER_VERSIONS}, "
                                    f"not {version}")
    with _LOCK:
        path = (Path(source).expanduser() if source is not None
                else upstream._default_source(version))
        key = (str(path.resolve()), tuple(patches))
        if key not in _LOADED:
            with warnings.catch_warnings():  # the CPU wheel warns when numpy is absent
                warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
                importlib.import_module("torch")
            closure = upstream.resolve_closure(path, ROOTS, manager_policy())
            origin, found = closure.origin, closure.version
            entries = upstream.plan_closure(closure, patches)
            mods, stubbed = upstream.run_plan(entries, origin, (*ROOTS, "utils.hashing"),
                                              during=_fill_registry)
            utils = mods["v1.core.kv_cache_utils"]
            utils.init_none_hash(mods["utils.hashing"].sha256)
            _LOADED[key] = ManagerModules(
                kv_cache_manager=mods["v1.core.kv_cache_manager"],
                kv_cache_coordinator=mods["v1.core.kv_cache_coordinator"],
                single_type=mods["v1.core.single_type_kv_cache_manager"],
                kv_cache_interface=mods["v1.kv_cache_interface"],
                block_pool=mods["v1.core.block_pool"], kv_cache_utils=utils,
                hashing=mods["utils.hashing"], version=found.split()[-1], origin=origin,
                stubbed=stubbed, patches=tuple(patches), real=tuple(sorted(closure.real)))
        return _LOADED[key]

