"""A ``BlockTable`` whose window drop keeps the first kept block linked to the freed block
before it (upstream's drop): ``fork`` then walks out of the table, into the freed block or
through its recycled object."""

from __future__ import annotations

from prefixcache.block_table import BlockTable as _BlockTable
from prefixcache.interfaces import Block

__all__ = ["BlockTable"]


class BlockTable(_BlockTable):
    def _drop_window(self, end: int, null_block: Block) -> None:
        blocks = self._blocks
        for index in range(end):
            block = blocks[index]
            if block is not null_block:
                self._allocator.free(block)
                blocks[index] = null_block
        # BUG: the first kept block is not cut loose from the freed one (_detach_prev)
