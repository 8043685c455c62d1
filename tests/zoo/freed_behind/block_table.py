"""A ``BlockTable`` whose ``free`` frees block after block and only notices a block freed
behind it when the allocator refuses that one (the blocks before it are gone by then)."""

from __future__ import annotations

from prefixcache.block_table import BlockTable as _BlockTable

__all__ = ["BlockTable"]


class BlockTable(_BlockTable):
    def free(self) -> None:
        for block in self._blocks.list():
            self._allocator.free(block)  # BUG: no check that every block still holds its id
        self._blocks.reset()
