"""Broken device-aware allocators (swapping between GPU and CPU).

``Device`` is imported here on purpose: the suite's adapter reads ``Device`` from the module
of the allocator's class (see ``tests/zoo/block_table.py`` for the matching workaround).
"""

from __future__ import annotations

from prefixcache._validation import checked_blocks
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator, NullBlock, _share_block_id
from prefixcache.errors import NoFreeBlocksError, SwapError
from prefixcache.interfaces import Block, BlockId
from prefixcache.naive_block import check_no_duplicate_objects
from prefixcache.utils import Device

__all__ = ["Device", "SwapInOnSource", "SwapMappingReversed"]


class SwapMappingReversed(CpuGpuBlockAllocator):
    """``swap`` returns the mapping as {destination id: source id}."""

    def swap(self, blocks: list[Block], src_device: Device, dst_device: Device) -> dict[int, int]:
        mapping = super().swap(blocks, src_device, dst_device)
        return {dst: src for src, dst in mapping.items()}  # BUG: was `mapping`


class SwapInOnSource(CpuGpuBlockAllocator):
    """``swap`` swaps the blocks back in on the *source* device (device arguments mixed up)."""

    def swap(self, blocks: list[Block], src_device: Device, dst_device: Device) -> dict[int, int]:
        src = self._allocator_for(src_device)
        dst = self._allocator_for(dst_device)
        if src is dst:
            raise SwapError("source and destination device are the same")
        blocks = checked_blocks(blocks)  # argument checks as upstream: the bug is elsewhere
        check_no_duplicate_objects(blocks)
        representative: dict[BlockId, Block] = {}
        src_ids: list[BlockId] = []
        for block in blocks:
            block_id = block.block_id
            if (
                isinstance(block, NullBlock)
                or block_id is None
                or self._block_ids_to_allocator.get(block_id) is not src
                or getattr(block, "_owner", None) is not src
                or src.get_block_refcount(block_id) == 0
            ):
                raise SwapError(f"block {block_id} is not held on {src_device}")
            src_ids.append(block_id)
            representative.setdefault(block_id, block)
        firsts = list(representative.values())
        if dst.get_num_free_blocks_needed_for_swap_in(firsts) > dst.get_num_free_blocks():
            raise NoFreeBlocksError()
        src.swap_out(blocks)
        src.swap_in(firsts)  # BUG: was dst.swap_in(firsts)
        mapping: dict[int, int] = {}
        for block, src_id in zip(blocks, src_ids, strict=True):
            first = representative[src_id]
            dst_id = first.block_id
            if dst_id is None:
                raise SwapError("swap-in left a block without an id")
            if block is not first:
                _share_block_id(dst, block, dst_id)
            mapping[src_id] = dst_id
        self._swap_mapping.update(mapping)
        return mapping
