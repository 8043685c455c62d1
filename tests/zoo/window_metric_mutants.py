"""Broken allocators with the upstream defects 3 and 4 of issue 18: a swap-in counted as a
cache query (HIT), and sliding-window tables that cannot swap or whose swap moves the null
block. Every ``# BUG`` line is the one change from the bundled code.

``Device`` is imported here on purpose: the suite's adapter reads ``Device`` from the module
of the allocator's class (see ``tests/zoo/block_table.py``).
"""

from __future__ import annotations

from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.interfaces import Block
from prefixcache.utils import Device
from tests.zoo.plumbing import PluggableAllocator

__all__ = ["Device", "SwapInCountsQueries", "WindowSwapMovesNull", "WindowSwapRefusesNull"]


class SwapInCountsQueries(PluggableAllocator):
    """``swap_in`` re-registers every full block by content and counts it as a cache query,
    a hit on a cached id and a miss otherwise (upstream): a swap round trip changes the hit
    rate although no request was admitted."""

    def swap_in(self, blocks: list[Block]) -> None:
        for block in blocks:  # the bundled swap_in validates and assigns; only count here
            content_hash = block.content_hash if block.is_full else None
            if content_hash is not None and block.block_id is None:
                # BUG: a swap-in is no admission; the bundled swap_in records nothing
                self.metric_data.query(hit=content_hash in self._cached_blocks)
        super().swap_in(blocks)


class WindowSwapRefusesNull(CpuGpuBlockAllocator):
    """``swap`` does not skip the null block: a sliding-window table that dropped blocks
    cannot be swapped (``swap(table.blocks, ...)`` is refused, the null block twice in the
    list or a GPU block that is not the table's), so swap preemption of a long-context
    sliding-window sequence fails (issue 18, defect 4)."""

    def _without_null(self, blocks: list[Block]) -> list[Block]:
        return blocks  # BUG: was the list less every occurrence of the null block


class WindowSwapMovesNull(CpuGpuBlockAllocator):
    """``swap`` moves the block the null block wraps along with the table's blocks: the null
    block's GPU id is released and it lands on the other device, under every table that
    holds it."""

    def swap(self, blocks: list[Block], src_device: Device, dst_device: Device) -> dict[int, int]:
        null_block = self._null_block
        if null_block is None or not any(block is null_block for block in blocks):
            return super().swap(blocks, src_device, dst_device)
        proxy = null_block._proxy  # type: ignore[attr-defined]
        real = [block for block in blocks if block is not null_block]
        return super().swap([proxy, *real], src_device, dst_device)  # BUG: the null block stays
