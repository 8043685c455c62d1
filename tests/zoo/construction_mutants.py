"""Broken constructors (API.md sections 4 and 5): the allocator every program builds with
``CpuGpuBlockAllocator.create`` is right, but explicit block ids or malformed constructor
arguments are mishandled. Only ``Construct`` (an allocator built beside the program's) reaches
these. Every ``# BUG`` line is the one change from the bundled code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.hashing import HashFunction
from prefixcache.utils import Device  # the adapter reads Device from the allocator's module
from tests.zoo.plumbing import PluggableAllocator

__all__ = ["AnyTypeCreates", "ContiguousIdsAllocator", "Device", "LenientBlockIdsAllocator"]


class LenientBlockIdsAllocator(PluggableAllocator):
    """Explicit block ids are cleaned instead of checked: duplicates, non-ints and ids out of
    range are dropped silently and the count is taken from what is left."""

    def __init__(self, num_blocks: int, block_size: int, block_ids: Iterable[int] | None = None,
                 *args: Any, **kwargs: Any) -> None:
        if block_ids is not None:
            block_ids = [i for i in dict.fromkeys(block_ids)  # BUG: bad ids dropped, not refused
                         if type(i) is int and 0 <= i < 2**64]
            num_blocks = len(block_ids)
        super().__init__(num_blocks, block_size, block_ids, *args, **kwargs)


class ContiguousIdsAllocator(PluggableAllocator):
    """Valid explicit block ids are taken as the contiguous ascending range from the smallest
    (what ``create`` passes), so gaps and the order given are lost."""

    def __init__(self, num_blocks: int, block_size: int, block_ids: Iterable[int] | None = None,
                 *args: Any, **kwargs: Any) -> None:
        ids = None if block_ids is None else list(block_ids)
        if ids is not None and all(type(i) is int for i in ids) \
                and len(set(ids)) == len(ids) == num_blocks:
            start = min(ids, default=0)
            ids = list(range(start, start + num_blocks))  # BUG: assumes a contiguous range
        super().__init__(num_blocks, block_size, ids, *args, **kwargs)


class AnyTypeCreates(CpuGpuBlockAllocator):
    """``create`` builds naive allocators for any ``allocator_type`` it does not know, instead
    of refusing it (a typo in an engine's config silently turns prefix caching off)."""

    @staticmethod
    def create(allocator_type: str, num_gpu_blocks: int, num_cpu_blocks: int, block_size: int,
               hash_function: HashFunction | None = None) -> CpuGpuBlockAllocator:
        if allocator_type != "prefix_caching":
            allocator_type = "naive"  # BUG: unknown types fall back to naive
        return CpuGpuBlockAllocator.create(allocator_type, num_gpu_blocks, num_cpu_blocks,
                                           block_size, hash_function)
