"""Errors of the wrong builtin class: typed, refused without a trace, yet an engine's
``except`` clause written for the class API.md pins (:mod:`models.error_classes`) misses them.
Every ``# BUG`` line is the one change from the bundled code.
"""

from __future__ import annotations

from typing import Any

from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.errors import InvalidArgumentError, PrefixCacheError
from prefixcache.errors import NoFreeBlocksError as BundledNoFreeBlocksError
from prefixcache.evictor import LRUEvictor
from prefixcache.interfaces import BlockAllocator, Device
from tests.zoo.plumbing import PluggableAllocator


class NoFreeBlocksError(PrefixCacheError, RuntimeError):  # BUG: API.md: a ValueError
    """Out of blocks, but not a ``ValueError``."""


class RuntimeNoFreeBlocksAllocator(PluggableAllocator):
    """Raises its own ``NoFreeBlocksError`` (a ``RuntimeError``) where the bundled one raises
    the ``ValueError`` subclass; everything else is the bundled allocator."""

    def allocate_mutable_block(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().allocate_mutable_block(*args, **kwargs)
        except BundledNoFreeBlocksError as exc:
            raise NoFreeBlocksError() from exc

    def allocate_immutable_block(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().allocate_immutable_block(*args, **kwargs)
        except BundledNoFreeBlocksError as exc:
            raise NoFreeBlocksError() from exc

    def allocate_immutable_blocks(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().allocate_immutable_blocks(*args, **kwargs)
        except BundledNoFreeBlocksError as exc:
            raise NoFreeBlocksError() from exc


class ValueErrorUpdateEvictor(LRUEvictor):
    """``update`` of a non-candidate raises a ``ValueError`` (API.md: ``KeyError``)."""

    def update(self, block_id: int, last_accessed: float) -> None:
        if block_id not in self.free_table:
            raise InvalidArgumentError(f"block id {block_id} is not a candidate")  # BUG
        super().update(block_id, last_accessed)


class ValueErrorUpdateAllocator(PluggableAllocator):
    evictor_class = ValueErrorUpdateEvictor


class ValueErrorDeviceAllocator(CpuGpuBlockAllocator):
    """A device that is not a ``Device`` is refused with a ``ValueError`` (API.md:
    ``KeyError``)."""

    def _allocator_for(self, device: Device | None) -> BlockAllocator:
        if not isinstance(device, Device):
            raise InvalidArgumentError(f"unknown device {device!r}")  # BUG: not a KeyError
        return super()._allocator_for(device)
