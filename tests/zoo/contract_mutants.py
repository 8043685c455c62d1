"""Broken computed answers (issue 18, defects 1 and 2): the bundled allocator with upstream's
behaviour where the contract departs from it (docs/CONTRACT.md)."""

from __future__ import annotations

from prefixcache.interfaces import Block
from tests.zoo.plumbing import PluggableAllocator

__all__ = ["ComputedIdsWithHoles", "FreedUnwrittenStaysComputed"]


class FreedUnwrittenStaysComputed(PluggableAllocator):
    """A cached id released before any mark counts as computed while evictable and is revived
    computed by a hit, although no batch ever wrote its KV (upstream's behaviour)."""

    def _release(self, block_id: int, block: Block) -> None:
        super()._release(block_id, block)
        self._unwritten.discard(block_id)  # BUG: forgets that its KV was never written


class ComputedIdsWithHoles(PluggableAllocator):
    """``get_computed_block_ids`` skips an uncomputed id and goes on (upstream's filter), so
    an evicted head leaves computed ids after a hole."""

    def get_computed_block_ids(
        self,
        prev_computed_block_ids: list[int],
        block_ids: list[int],
        skip_last_block_id: bool = True,
    ) -> list[int]:
        start = len(prev_computed_block_ids)
        super().get_computed_block_ids(list(prev_computed_block_ids), block_ids,
                                       skip_last_block_id)  # the argument checks
        end = len(block_ids) - (1 if skip_last_block_id else 0)
        prev_computed_block_ids.extend(
            i for i in block_ids[start:end] if self.block_is_computed(i)  # BUG: not a prefix
        )
        return prev_computed_block_ids
