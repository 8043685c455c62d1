"""Device-aware allocators with argument-validation bugs (issue #8, misuse): each accepts a
malformed argument, or changes state before refusing one. Not part of ``ZOO``: they exercise
the ``misuse`` rules' malformed calls (``models.operations.Malformed``) and are run by
``tests/hardening/test_malformed_arguments.py``.

``Device`` is imported here on purpose: the adapter reads it from the allocator's module (see
``tests/zoo/device_mutants.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefixcache import PREFIXCACHE_CLAIMS
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.errors import SwapError
from prefixcache.interfaces import Block, BlockAllocator
from prefixcache.utils import Device

__all__ = ["Device", "device_none_means_gpu", "prefixcache_claims", "swap_same_device_late",
           "tokens_coerced"]


class DeviceNoneMeansGpu(CpuGpuBlockAllocator):
    """Routes ``device=None`` to the GPU (a "default device" convenience the API does not
    have) instead of raising ``UnknownDeviceError``."""

    def _allocator_for(self, device: Device | None) -> BlockAllocator:
        return super()._allocator_for(Device.GPU if device is None else device)  # BUG


class TokensCoerced(CpuGpuBlockAllocator):
    """Normalizes token ids with ``int()`` (meant for numpy ints), which turns ``True`` into
    1 and ``1.5`` into 1 instead of refusing them."""

    def allocate_immutable_block(self, prev_block: Block | None, token_ids: list[int],
                                 device: Device, extra_hash: int | None = None) -> Block:
        return super().allocate_immutable_block(prev_block, _coerced(token_ids), device,
                                                extra_hash)

    def allocate_immutable_blocks(self, prev_block: Block | None,
                                  block_token_ids: list[list[int]], device: Device,
                                  extra_hash: int | None = None) -> list[Block]:
        chunks = [_coerced(c) for c in block_token_ids] if isinstance(block_token_ids, list) \
            else block_token_ids
        return super().allocate_immutable_blocks(prev_block, chunks, device, extra_hash)


def _coerced(tokens: Any) -> Any:
    if isinstance(tokens, list) and all(isinstance(t, int | float) for t in tokens):
        return [int(t) for t in tokens]  # BUG: bools and floats pass as ints
    return tokens


class SwapSameDeviceLate(CpuGpuBlockAllocator):
    """Checks that the source and destination differ only after swapping the blocks out, so
    a refused swap to the same device leaves them without ids."""

    def swap(self, blocks: list[Block], src_device: Device, dst_device: Device) -> dict[int, int]:
        src = self._allocator_for(src_device)
        if src is self._allocator_for(dst_device) and isinstance(blocks, list):
            src.swap_out(blocks)  # BUG: the check below came first
            raise SwapError("source and destination device are the same")
        return super().swap(blocks, src_device, dst_device)


def _factory(name: str, cls: type[CpuGpuBlockAllocator]) -> Callable[..., CpuGpuBlockAllocator]:
    def factory(allocator_type: str, num_gpu_blocks: int, num_cpu_blocks: int,
                block_size: int) -> CpuGpuBlockAllocator:
        base = CpuGpuBlockAllocator.create(allocator_type, num_gpu_blocks, num_cpu_blocks,
                                           block_size)
        return cls(cpu_block_allocator=base._allocators[Device.CPU],
                   gpu_block_allocator=base._allocators[Device.GPU])

    factory.__name__ = factory.__qualname__ = name
    return factory


device_none_means_gpu = _factory("device_none_means_gpu", DeviceNoneMeansGpu)
tokens_coerced = _factory("tokens_coerced", TokensCoerced)
swap_same_device_late = _factory("swap_same_device_late", SwapSameDeviceLate)


def prefixcache_claims(factory: Any) -> dict[str, Any]:
    """The bundled allocator's claims (typed errors, atomic): read by ``load_target``."""
    return {**PREFIXCACHE_CLAIMS, "name": f"zoo/{getattr(factory, '__name__', '?')}",
            "version": "mutant"}
