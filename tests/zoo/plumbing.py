"""Seams for the mutants: the bundled prefix-caching allocator with its block and evictor
classes made replaceable. Adds no behaviour: with the defaults it *is* the bundled allocator.
"""

from __future__ import annotations

from typing import Any, ClassVar

from prefixcache.evictor import Evictor, LRUEvictor
from prefixcache.interfaces import Block, BlockAllocator
from prefixcache.prefix_caching_block import PrefixCachingBlock, PrefixCachingBlockAllocator


class PluggableAllocator(PrefixCachingBlockAllocator):
    """``PrefixCachingBlockAllocator`` whose block objects are ``block_class`` and whose evictor
    (also after ``reset_prefix_cache``) is an ``evictor_class``."""

    block_class: ClassVar[type[PrefixCachingBlock]] = PrefixCachingBlock
    evictor_class: ClassVar[type[Evictor]] = LRUEvictor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.evictor = self.evictor_class()

    def _create_block(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        block_size: int,
        allocator: BlockAllocator,
        block_id: int | None = None,
        computed: bool = False,
        extra_hash: int | None = None,
    ) -> Block:
        return self.block_class(
            prev_block=prev_block,
            token_ids=token_ids,
            block_size=block_size,
            allocator=self,
            block_id=block_id,
            computed=computed,
            extra_hash=extra_hash,
        )

    def reset_prefix_cache(self) -> bool:
        done = super().reset_prefix_cache()
        if done:
            self.evictor = self.evictor_class()
        return done
