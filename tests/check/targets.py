"""Targets for the ``prefixcache check`` tests: one zoo mutant, and the same mutant with a second
bug injected around it (a deviation an adopted baseline of the first must not absorb); and
vLLM 0.8's allocator with a hit-rate bug injected around it (the README's ratchet example)."""

from __future__ import annotations

from typing import Any

from prefixcache import PREFIXCACHE_CLAIMS
from tests.zoo.v0.broken import ZOO


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


def vllm_hit_rate_halved(allocator_type: str, num_gpu_blocks: int, num_cpu_blocks: int,
                         block_size: int) -> Any:
    """vLLM 0.8's allocator whose ``get_prefix_cache_hit_rate`` reports half the true rate
    (a HIT deviation vLLM itself does not have)."""
    from properties.families.v0.upstream import vllm_v0_allocator

    alloc = vllm_v0_allocator(allocator_type, num_gpu_blocks, num_cpu_blocks, block_size)
    real = alloc.get_prefix_cache_hit_rate
    alloc.get_prefix_cache_hit_rate = lambda device: real(device) / 2
    return alloc


def prefixcache_claims(factory: Any) -> dict[str, Any]:
    """What the wrapped allocator claims (read by ``properties.core.targets.load_target``)."""
    if factory is vllm_hit_rate_halved:
        from properties.families.v0 import upstream
        return {**upstream.prefixcache_claims(upstream.vllm_v0_allocator),
                "name": "check/vllm_hit_rate_halved"}
    return {**PREFIXCACHE_CLAIMS, "name": f"check/{factory.__name__}", "version": "test"}
