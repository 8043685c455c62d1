"""Full observable-state snapshots of allocators, blocks and tables.

``snapshot(...)`` captures everything a failed operation must leave untouched, so
error-path tests can assert ``snapshot(...) == before``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from prefixcache import (
    BlockTable,
    CpuGpuBlockAllocator,
    LRUEvictor,
    NaiveBlockAllocator,
    PrefixCachingBlockAllocator,
)
from prefixcache.interfaces import Block


def _naive_state(alloc: NaiveBlockAllocator) -> dict[str, Any]:
    return {
        "free_count": alloc.get_num_free_blocks(),
        "free_deque": list(alloc._free_block_indices),
        "refcounts": dict(alloc._refcounter._refcounts),
        "cows": alloc._cow_tracker.pending(),
    }


def _prefix_state(alloc: PrefixCachingBlockAllocator) -> dict[str, Any]:
    evictor = alloc.evictor
    assert isinstance(evictor, LRUEvictor)
    return {
        "free_count": alloc.get_num_free_blocks(),
        "free_deque": list(alloc._hashless_allocator._free_block_indices),
        "refcounts": dict(alloc._refcounter._refcounts),
        "cached": list(alloc._cached_blocks.items()),
        "evictor_table": [
            (bid, m.content_hash, m.num_hashed_tokens, m.last_accessed)
            for bid, m in evictor.free_table.items()
        ],
        "evictor_order": evictor.peek_order(),
        "trackers": {
            bid: (t.active, t.last_accessed, t.computed, t.content_hash)
            for bid, t in alloc._block_tracker.items()
        },
        "touched": sorted(alloc._touched_blocks),
        "cows": alloc._cow_tracker.pending(),
        "metrics": dataclasses.asdict(alloc.metric_data),
        "hit_rate": alloc.get_prefix_cache_hit_rate(),
    }


def allocator_state(alloc: object) -> dict[str, Any]:
    if isinstance(alloc, CpuGpuBlockAllocator):
        return {
            "devices": {d.name: allocator_state(a) for d, a in alloc._allocators.items()},
            "swaps": dict(alloc._swap_mapping),
            "null": None if alloc.null_block is None else alloc.null_block.block_id,
        }
    if isinstance(alloc, PrefixCachingBlockAllocator):
        return _prefix_state(alloc)
    if isinstance(alloc, NaiveBlockAllocator):
        return _naive_state(alloc)
    raise TypeError(f"no snapshot for {type(alloc)!r}")


def block_state(block: Block) -> tuple[Any, ...]:
    return (
        id(block),
        block.block_id,
        list(block.token_ids),
        id(block.prev_block) if block.prev_block is not None else None,
        getattr(block, "_owner", None) is not None and id(block._owner),  # type: ignore[attr-defined]
        block.content_hash,
    )


def table_state(table: BlockTable) -> tuple[Any, ...]:
    return (
        list(table.physical_block_ids),
        [id(b) for b in table.blocks],
        table.num_full_slots,
        [block_state(b) for b in table.blocks],
    )


def snapshot(
    alloc: object, blocks: Iterable[Block] = (), tables: Iterable[BlockTable] = ()
) -> dict[str, Any]:
    return {
        "allocator": allocator_state(alloc),
        "blocks": [block_state(b) for b in blocks],
        "tables": [table_state(t) for t in tables],
    }
