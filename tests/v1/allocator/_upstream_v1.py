"""Load vLLM 0.33.0's own ``block_pool.py`` / ``kv_cache_utils.py`` from its wheel, without
torch or the engine, for the differential tests. Private to these tests: the suite's real
loader is ``properties/families/v1/upstream.py``.

The real modules executed: ``vllm/utils/hashing.py``, ``vllm/utils/math_utils.py``,
``vllm/v1/core/kv_cache_metrics.py``, ``vllm/v1/core/kv_cache_utils.py``,
``vllm/v1/core/block_pool.py``. Everything else they import is a stand-in that the pool and
hasher never call into except: the event classes (``prefixcache.v1.kv_events``, same fields, so
both pools' events compare equal), ``get_mm_features_in_window`` (the bundled implementation of
the same bisection) and ``tensor_data`` (raw bytes of a buffer). ``sys.modules`` is restored
after loading; nothing from the wheel is written to disk.
"""

from __future__ import annotations

import logging
import os
import sys
import zipfile
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from prefixcache.v1 import kv_events
from prefixcache.v1.core import kv_cache_utils as bundled_utils
from properties.families.v1.upstream import cached_wheel

WHEEL_ENV = "PREFIXCACHE_VLLM_V1_WHEEL"
REAL = (
    "vllm/utils/hashing.py",
    "vllm/utils/math_utils.py",
    "vllm/v1/core/kv_cache_metrics.py",
    "vllm/v1/core/kv_cache_utils.py",
    "vllm/v1/core/block_pool.py",
)


def find_wheel() -> Path | None:
    """``$PREFIXCACHE_VLLM_V1_WHEEL``, else the vllm 0.33.0 wheel the v1 loader fetched
    (``python -m properties.upstream fetch vllm-v1``)."""
    explicit = os.environ.get(WHEEL_ENV)
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    return cached_wheel("0.33.0")


def _module(name: str, package: bool = False, **attrs: Any) -> ModuleType:
    module = ModuleType(name)
    if package:
        module.__path__ = []
    module.__dict__.update(attrs)
    return module


def _placeholder(name: str) -> type:
    return type(name, (), {})


def _stubs() -> dict[str, ModuleType]:
    packages = [
        "vllm",
        "vllm.v1",
        "vllm.v1.core",
        "vllm.v1.metrics",
        "vllm.utils",
        "vllm.distributed",
        "vllm.multimodal",
    ]
    stubs = {name: _module(name, package=True) for name in packages}
    stubs["cbor2"] = _module("cbor2", dumps=None)
    stubs["vllm.envs"] = _module("vllm.envs", VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=True)
    stubs["vllm.config"] = _module("vllm.config", VllmConfig=_placeholder("VllmConfig"))
    stubs["vllm.logger"] = _module("vllm.logger", init_logger=logging.getLogger)
    stubs["vllm.multimodal.utils"] = _module(
        "vllm.multimodal.utils",
        get_mm_features_in_window=bundled_utils.get_mm_features_in_window,
    )
    interface = {
        name: _placeholder(name)
        for name in (
            "KVCacheConfig",
            "KVCacheGroupSpec",
            "KVCacheSpec",
            "MambaSpec",
            "UniformTypeKVCacheSpecs",
        )
    }
    stubs["vllm.v1.kv_cache_interface"] = _module(
        "vllm.v1.kv_cache_interface", iter_layer_specs=lambda spec: iter((spec,)), **interface
    )
    stubs["vllm.v1.kv_cache_spec_registry"] = _module(
        "vllm.v1.kv_cache_spec_registry", KVCacheSpecRegistry=_placeholder("KVCacheSpecRegistry")
    )
    stubs["vllm.v1.request"] = _module("vllm.v1.request", Request=_placeholder("Request"))
    stubs["vllm.v1.utils"] = _module("vllm.v1.utils", tensor_data=memoryview)
    stubs["vllm.v1.metrics.stats"] = _module(
        "vllm.v1.metrics.stats", KVCacheEvictionEvent=_placeholder("KVCacheEvictionEvent")
    )
    stubs["vllm.distributed.kv_events"] = _module(
        "vllm.distributed.kv_events",
        **{name: getattr(kv_events, name) for name in kv_events.__all__},
    )
    return stubs


def load(wheel: Path) -> SimpleNamespace:
    """The real modules, as ``.hashing``, ``.kv_cache_utils``, ``.block_pool``."""
    saved = {k: v for k, v in sys.modules.items() if k == "cbor2" or k.split(".")[0] == "vllm"}
    for name in saved:
        del sys.modules[name]
    loaded: dict[str, ModuleType] = {}
    try:
        sys.modules.update(_stubs())
        with zipfile.ZipFile(wheel) as archive:
            for path in REAL:
                name = path[: -len(".py")].replace("/", ".")
                module = _module(name, __file__=f"{wheel}!{path}")
                sys.modules[name] = module
                exec(compile(archive.read(path), module.__file__, "exec"), module.__dict__)
                loaded[name] = module
    finally:
        for name in [k for k in sys.modules if k == "cbor2" or k.split(".")[0] == "vllm"]:
            del sys.modules[name]
        sys.modules.update(saved)
    return SimpleNamespace(
        hashing=loaded["vllm.utils.hashing"],
        kv_cache_utils=loaded["vllm.v1.core.kv_cache_utils"],
        block_pool=loaded["vllm.v1.core.block_pool"],
    )
