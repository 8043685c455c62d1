"""Broken device-aware allocators that only the table queries and sliding-window tables reach:
the id space, the swap log and the null block.

``Device`` is imported here on purpose: the suite's adapter reads ``Device`` from the module
of the allocator's class (see ``tests/zoo/block_table.py`` for the matching workaround).
"""

from __future__ import annotations

from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator, NullBlock
from prefixcache.interfaces import Block
from prefixcache.utils import Device
from tests.zoo.plumbing import PluggableAllocator

__all__ = ["Device", "NullBlockFreed", "NullBlockWritable", "OwnerReadWithoutDefault",
           "PhysicalIdNotOffset", "SwapLogNotReset"]


class PhysicalIdNotOffset(CpuGpuBlockAllocator):
    """``get_physical_block_id`` returns the absolute id: CPU ids do not map onto ``0..C-1``."""

    def get_physical_block_id(self, device: Device, absolute_id: int) -> int:
        super().get_physical_block_id(device, absolute_id)  # still validates the id
        return absolute_id  # BUG: was the position in the device's sorted ids


class SwapLogNotReset(CpuGpuBlockAllocator):
    """``get_and_reset_swaps`` returns the log but keeps it."""

    def get_and_reset_swaps(self) -> list[tuple[int, int]]:
        return list(self._swap_mapping.items())  # BUG: the log is not cleared


class NullBlockFreed(CpuGpuBlockAllocator):
    """``free`` of the null block frees the GPU block it wraps (a sliding-window table's free
    gives the null block's id back while it stays in use)."""

    def free(self, block: Block) -> None:
        if isinstance(block, NullBlock):
            proxy = block._proxy
            if proxy.block_id is not None:
                super().free(proxy)  # BUG: the null block must be skipped
            return
        super().free(block)


class _WritableNullBlock(NullBlock):
    __slots__ = ()

    def append_token_ids(self, token_ids: list[int]) -> None:
        self._proxy.append_token_ids(token_ids)  # BUG: the null block must refuse tokens


class NullBlockWritable(CpuGpuBlockAllocator):
    """The null block takes tokens: ``append_token_ids`` writes into the GPU block it wraps
    (every sliding-window table then shows them in its dropped entries)."""

    def allocate_or_get_null_block(self) -> Block:
        if self._null_block is None:
            self._null_block = _WritableNullBlock(self.allocate_mutable_block(None, Device.GPU))
        return self._null_block



class OwnerReadWithoutDefault(PluggableAllocator):
    """The ownership check of a device allocator's ``free`` reads ``block._owner`` without a
    default: a block class without the attribute (the null block) crashes it instead of being
    refused (``held_block_id``)."""

    def free(self, block: Block, keep_block_object: bool = False) -> None:
        _ = block._owner  # type: ignore[attr-defined]  # BUG: was getattr(block, "_owner", None)
        super().free(block, keep_block_object)
