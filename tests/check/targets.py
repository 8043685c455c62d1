"""Targets for the ``prefixcache check`` tests: one zoo mutant, and the same mutant with a second
bug injected around it (a deviation an adopted baseline of the first must not absorb)."""

from __future__ import annotations

from typing import Any

from prefixcache import PREFIXCACHE_CLAIMS
from tests.zoo.broken import ZOO


def hit_twice(allocator_type: str, num_gpu_blocks: int, num_cpu_blocks: int,
              block_size: int) -> Any:
    """The zoo's ``hit_counted_twice``: taking a cached reference records a second hit."""
    return ZOO["hit_counted_twice"].factory(allocator_type, num_gpu_blocks, num_cpu_blocks,
                                            block_size)


def hit_twice_swap_reversed(allocator_type: str, num_gpu_blocks: int, num_cpu_blocks: int,
                            block_size: int) -> Any:
    """``hit_twice`` whose ``swap`` also returns {destination id: source id} (the zoo's
    ``swap_mapping_reversed``, injected around the allocator)."""
    alloc = hit_twice(allocator_type, num_gpu_blocks, num_cpu_blocks, block_size)
    real = alloc.swap

    def swap(blocks: Any, src_device: Any, dst_device: Any) -> dict[int, int]:
        return {dst: src for src, dst in real(blocks, src_device, dst_device).items()}

    alloc.swap = swap
    return alloc


def prefixcache_claims(factory: Any) -> dict[str, Any]:
    """What the bundled allocator claims (read by ``properties.targets.load_target``)."""
    return {**PREFIXCACHE_CLAIMS, "name": f"check/{factory.__name__}", "version": "test"}
