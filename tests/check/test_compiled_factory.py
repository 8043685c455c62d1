"""A factory without ``__module__`` (a mypyc-compiled method is a builtin function with
``__module__ = None``) is still attributed to the module its spec names."""

from __future__ import annotations

from typing import Any

import prefixcache
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from properties.core.targets import claims_of, module_of, package_of

SPEC = "prefixcache.cpu_gpu_block_allocator:CpuGpuBlockAllocator.create"


class _NoModule:
    """Stands in for a compiled method: callable, ``__module__`` is None."""

    def __init__(self) -> None:
        self.__module__ = None  # type: ignore[assignment]

    def __call__(self, *args: Any) -> Any:
        return CpuGpuBlockAllocator.create(*args)


def test_a_factory_without_module_is_read_from_its_spec() -> None:
    factory = _NoModule()
    assert module_of(factory, SPEC) == "prefixcache.cpu_gpu_block_allocator"
    assert package_of(factory, SPEC) == "prefixcache"
    assert claims_of(factory, SPEC) == prefixcache.PREFIXCACHE_CLAIMS


def test_a_factory_with_a_module_ignores_the_spec() -> None:
    create = CpuGpuBlockAllocator.create
    assert module_of(create, "elsewhere:thing") == "prefixcache.cpu_gpu_block_allocator"
    assert claims_of(create) == prefixcache.PREFIXCACHE_CLAIMS
