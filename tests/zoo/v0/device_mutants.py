"""Broken device-aware swapping: patches of ``CpuGpuBlockAllocator.swap``
(``prefixcache/cpu_gpu_block_allocator.py``), each change marked ``# BUG``.
"""

from __future__ import annotations

from tests.zoo.patching import Patch

#: ``swap`` returns the mapping as {destination id: source id}.
SWAP_MAPPING_REVERSED = (Patch(
    "cpu_gpu_block_allocator", "CpuGpuBlockAllocator.swap",
    "self._swap_mapping.update(mapping)\nreturn mapping",
    "self._swap_mapping.update(mapping)\n"
    "return {dst: src for src, dst in mapping.items()}  # BUG: was `mapping`"),)

#: ``swap`` swaps the blocks back in on the *source* device (device arguments mixed up).
SWAP_IN_ON_SOURCE = (Patch("cpu_gpu_block_allocator", "CpuGpuBlockAllocator.swap",
                           "dst.swap_in(firsts)",
                           "src.swap_in(firsts)  # BUG: was dst.swap_in(firsts)"),)
