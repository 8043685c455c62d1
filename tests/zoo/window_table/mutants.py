"""The allocator of the window-table mutant: the bundled device-aware allocator, whose package
carries the broken ``BlockTable``."""

from __future__ import annotations

from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.utils import Device

__all__ = ["Device", "WindowDropKeepsLinkDevice"]


class WindowDropKeepsLinkDevice(CpuGpuBlockAllocator):
    """The bundled allocator; its package's ``BlockTable`` drop keeps the link."""
