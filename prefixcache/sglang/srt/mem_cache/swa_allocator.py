"""The FULL + SWA token-slot allocator (``sglang.srt.mem_cache.allocator.swa``), standard
library only: ``SWATokenToKVPoolAllocator(size, size_swa, page_size, ...)``.

Contract:

* Two pools of one slot per token (page size 1, as upstream's ``alloc``): the full pool
  (``full_attn_allocator``, slots ``1..size``) and the sliding-window pool
  (``swa_attn_allocator``, ``1..size_swa``), each with the token allocator's contract.
* ``alloc(n)`` takes ``n`` slots of each pool or none (None when either has fewer free) and
  pairs them: ``full_to_swa_index_mapping[full] = swa`` (0: no SWA peer). It returns the full
  slots; ``translate_loc_from_full_to_swa`` reads the peers.
* ``free(full)`` frees the full slots and the SWA peers they have, and clears their mapping;
  ``free_swa(full)`` frees only the peers (each must have one) and clears the mapping, the
  full slots stay allocated (a tombstone). ``set_full_to_swa_mapping`` re-points full slots at
  SWA slots (a tree adopting another slot's SWA KV). Every call checks all of its arguments
  first (:class:`~prefixcache.sglang.errors.DoubleFreeError`,
  :class:`~prefixcache.sglang.errors.InvalidSlotError`) and changes nothing when one fails.
* ``available_size()`` is the smaller of the two pools' free counts (what a request of ``n``
  tokens can get); ``full_available_size`` / ``swa_available_size`` each pool's.
"""

from __future__ import annotations

from collections.abc import Sequence

from prefixcache.sglang.errors import DoubleFreeError, InvalidArgumentError, InvalidSlotError
from prefixcache.sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator

__all__ = ["SWATokenToKVPoolAllocator"]


class SWATokenToKVPoolAllocator:
    """See the module docstring."""

    def __init__(self, size: int, size_swa: int, page_size: int = 1, dtype: object = None,
                 device: str = "cpu", kvcache: object = None, need_sort: bool = False) -> None:
        if page_size != 1:
            raise InvalidArgumentError(f"the SWA allocator hands out single slots (page size "
                                       f"1), got page_size={page_size!r}")
        self.page_size = 1
        self.device = device
        self.dtype = dtype
        self.full_attn_allocator = TokenToKVPoolAllocator(size, dtype, device, kvcache,
                                                          need_sort)
        self.swa_attn_allocator = TokenToKVPoolAllocator(size_swa, dtype, device, kvcache,
                                                         need_sort)
        self.full_to_swa_index_mapping = [0] * (size + 1)

    @property
    def size_full(self) -> int:
        return self.full_attn_allocator.size

    @property
    def size_swa(self) -> int:
        return self.swa_attn_allocator.size

    def clear(self) -> None:
        self.full_attn_allocator.clear()
        self.swa_attn_allocator.clear()
        self.full_to_swa_index_mapping = [0] * (self.size_full + 1)

    def available_size(self) -> int:
        return min(self.full_available_size(), self.swa_available_size())

    def full_available_size(self) -> int:
        return self.full_attn_allocator.available_size()

    def swa_available_size(self) -> int:
        return self.swa_attn_allocator.available_size()

    def alloc(self, need_size: int) -> list[int] | None:
        """``need_size`` full slots, each paired with a fresh SWA slot; None (nothing taken)
        when either pool is short."""
        if not isinstance(need_size, int) or need_size < 0:
            raise InvalidArgumentError(f"need_size must be a non-negative int, got {need_size!r}")
        if need_size > min(self.full_available_size(), self.swa_available_size()):
            return None
        full = self.full_attn_allocator.alloc(need_size)
        swa = self.swa_attn_allocator.alloc(need_size)
        if full is None or swa is None:  # unreachable: both checked above
            raise InvalidArgumentError("a pool ran short after its check")
        for f, s in zip(full, swa, strict=True):
            self.full_to_swa_index_mapping[f] = s
        return full

    def translate_loc_from_full_to_swa(self, kv_indices: Sequence[int]) -> list[int]:
        """Each full slot's SWA peer (0: none)."""
        self._check_full(kv_indices, distinct=False)
        return [self.full_to_swa_index_mapping[s] for s in kv_indices]

    def set_full_to_swa_mapping(self, full_indices: Sequence[int],
                                swa_indices: Sequence[int]) -> None:
        """Point each allocated full slot at an allocated SWA slot."""
        if len(full_indices) != len(swa_indices):
            raise InvalidArgumentError("full and SWA indices differ in length")
        self._check_full(full_indices, distinct=True)
        bad = [s for s in swa_indices if not self.swa_attn_allocator.allocated(s) or s == 0]
        if bad:
            raise InvalidSlotError(f"SWA slots {bad[:8]} are not handed out")
        for f, s in zip(full_indices, swa_indices, strict=True):
            self.full_to_swa_index_mapping[f] = s

    def clear_full_to_swa_mapping(self, full_indices: Sequence[int]) -> None:
        self._check_full(full_indices, distinct=False)
        for f in full_indices:
            self.full_to_swa_index_mapping[f] = 0

    def free(self, free_index: Sequence[int]) -> None:
        """Free full slots and their SWA peers."""
        self._check_full(free_index, distinct=True)
        peers = [p for p in (self.full_to_swa_index_mapping[s] for s in free_index) if p]
        self._check_swa(peers)
        self.swa_attn_allocator.free(peers)
        self.full_attn_allocator.free(free_index)
        for s in free_index:
            self.full_to_swa_index_mapping[s] = 0

    def free_segment(self, free_index: Sequence[int], *, start_pos: int = 0) -> None:
        self.free(free_index)

    def free_full(self, free_index: Sequence[int]) -> None:
        """Free full slots that have no SWA peer (any more)."""
        self._check_full(free_index, distinct=True)
        paired = [s for s in free_index if self.full_to_swa_index_mapping[s]]
        if paired:
            raise InvalidArgumentError(f"full slots {paired[:8]} still have SWA peers "
                                       "(free them with free)")
        self.full_attn_allocator.free(free_index)

    def free_swa(self, free_index: Sequence[int]) -> None:
        """Free the SWA peers of full slots (each must have one); the full slots stay."""
        self._check_full(free_index, distinct=True)
        peers = [self.full_to_swa_index_mapping[s] for s in free_index]
        if 0 in peers:
            raise DoubleFreeError(f"full slot {free_index[peers.index(0)]} has no SWA peer to "
                                  "free")
        self._check_swa(peers)
        self.swa_attn_allocator.free(peers)
        for s in free_index:
            self.full_to_swa_index_mapping[s] = 0

    def _check_full(self, slots: Sequence[int], *, distinct: bool) -> None:
        bad = [s for s in slots if not self.full_attn_allocator.allocated(s) or s == 0]
        if bad:
            raise InvalidSlotError(f"full slots {bad[:8]} are not handed out")
        if distinct and len(set(slots)) != len(slots):
            raise DoubleFreeError("a full slot appears twice in one call")

    def _check_swa(self, peers: Sequence[int]) -> None:
        if len(set(peers)) != len(peers):
            raise DoubleFreeError("two full slots share one SWA peer")
        bad = [s for s in peers if not self.swa_attn_allocator.allocated(s)]
        if bad:
            raise DoubleFreeError(f"SWA slots {bad[:8]} are free already")
