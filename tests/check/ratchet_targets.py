"""Bundled allocators with a finding that has a size, each at two sizes (patched like the zoo,
``tests.zoo.patching``): a ratchet test adopts the first and meets the second.

- ``tuple_hash_key`` keys blocks by Python's ``hash`` of the tuple (as Aphrodite does), 64 bits;
  ``tuple_hash_key_58_bits`` is the same key cut to 58 bits (weaker: a narrower spread);
- ``free_count_plus_1`` / ``free_count_plus_2`` report one / two more free blocks than there are
  while any block is in use;
- ``hit_rate_plus_eighth`` / ``hit_rate_plus_quarter`` report the hit rate 1/8 / 1/4 too high.
"""

from __future__ import annotations

from typing import Any

from tests.zoo.patching import Patch, claims, factory, register

_DIGEST = 'return int.from_bytes(state.digest(), "big")'
_FREE = "return self._allocator_for(device).get_num_free_blocks()"
_RATE = "return self._allocator_for(device).get_prefix_cache_hit_rate()"


def _tuple_hash(bits: int) -> tuple[Patch, ...]:
    return (Patch("hashing", "hash_block_tokens", _DIGEST,
                  f"return hash((is_first_block, prev_block_hash, *token_ids)) & "
                  f"((1 << {bits}) - 1)  # BUG: was the whole digest"),)


def _free_plus(extra: int) -> tuple[Patch, ...]:
    """Over-counts by ``extra`` while any block is in use (the initial check passes)."""
    return (Patch("cpu_gpu_block_allocator", "CpuGpuBlockAllocator.get_num_free_blocks", _FREE,
                  "free = self._allocator_for(device).get_num_free_blocks()\n"
                  "total = self._allocator_for(device).get_num_total_blocks()\n"
                  f"return free + ({extra} if free < total else 0)  # BUG"),)


MUTANTS: dict[str, tuple[Patch, ...]] = {
    "tuple_hash_key": _tuple_hash(64),
    "tuple_hash_key_58_bits": _tuple_hash(58),
    "free_count_plus_1": _free_plus(1),
    "free_count_plus_2": _free_plus(2),
    "hit_rate_plus_eighth": (Patch("cpu_gpu_block_allocator",
                                   "CpuGpuBlockAllocator.get_prefix_cache_hit_rate", _RATE,
                                   _RATE + " + 0.125  # BUG"),),
    "hit_rate_plus_quarter": (Patch("cpu_gpu_block_allocator",
                                    "CpuGpuBlockAllocator.get_prefix_cache_hit_rate", _RATE,
                                    _RATE + " + 0.25  # BUG"),),
}

for _name, _patches in MUTANTS.items():
    register(_name, _patches)
    globals()[_name] = factory(_name, __name__)


def prefixcache_claims(target_factory: Any) -> dict[str, Any]:
    """What a patched copy claims (read by ``properties.core.targets.load_target``)."""
    return claims(getattr(target_factory, "__name__", "?"))
