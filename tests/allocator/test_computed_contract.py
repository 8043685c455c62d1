"""Computed answers: only blocks whose KV the engine wrote, and only as a prefix
(docs/CONTRACT.md: upstream's `freed-unwritten-hit-computed` and `computed-ids-with-holes`).

A block's KV is written by the batch that computes it; ``mark_blocks_as_computed`` closes
that batch. A block freed before the mark (an aborted request) never had its KV written, so
a later hit on it must not let the engine skip its prefill. An engine skips
``len(computed) * block_size`` tokens, so computed ids must be a prefix of the table.
"""

from __future__ import annotations

from prefixcache import PrefixCachingBlockAllocator
from prefixcache.prefix_caching_block import ComputedBlocksTracker


def _ids(*blocks: object) -> list[int]:
    return [b.block_id for b in blocks]  # type: ignore[attr-defined]


def test_block_freed_before_the_mark_is_not_computed_on_a_hit() -> None:
    """Allocate, abort before the mark, re-request: the hit is not computed."""
    a = PrefixCachingBlockAllocator(num_blocks=4, block_size=4)
    b0 = a.allocate_immutable_block(None, [1, 2, 3, 4])
    b1 = a.allocate_mutable_block(b0)
    a.free(b1)
    a.free(b0)
    assert not a.block_is_computed(0)  # evictable but unwritten
    assert a.get_num_free_blocks() == 4 and 0 in a.evictor  # still cached, as upstream
    c0 = a.allocate_immutable_block(None, [1, 2, 3, 4])
    c1 = a.allocate_mutable_block(c0)
    assert c0.block_id == 0  # a hit: the same id
    assert a.get_computed_block_ids([], _ids(c0, c1), skip_last_block_id=True) == []
    assert a.find_cached_blocks_prefix([c0.content_hash]) == []  # type: ignore[list-item]
    # the re-request's prefill runs, then the mark: now its KV is written
    a.mark_blocks_as_computed([])
    assert a.get_computed_block_ids([], _ids(c0, c1), skip_last_block_id=True) == [0]
    a.free(c1)
    a.free(c0)
    assert a.block_is_computed(0)  # evictable and written
    a.allocate_immutable_block(None, [1, 2, 3, 4])
    assert a.get_computed_block_ids([], [0], skip_last_block_id=False) == [0]


def test_mark_while_evictable_does_not_write_it() -> None:
    """A mark after the abort (the batch ran without the aborted request) writes nothing."""
    a = PrefixCachingBlockAllocator(num_blocks=2, block_size=2)
    a.free(a.allocate_immutable_block(None, [1, 2]))
    a.mark_blocks_as_computed([])
    assert not a.block_is_computed(0)
    hit = a.allocate_immutable_block(None, [1, 2])
    assert a.get_computed_block_ids([], [hit.block_id], skip_last_block_id=False) == []  # type: ignore[list-item]
    assert a._touched_blocks == {0}


def test_same_batch_sharer_keeps_it_uncomputed_until_the_mark() -> None:
    """Two requests of one batch share a block; the first aborts before the batch runs."""
    a = PrefixCachingBlockAllocator(num_blocks=4, block_size=2)
    first = a.allocate_immutable_block(None, [7, 8])
    second = a.allocate_immutable_block(None, [7, 8])
    a.free(first)
    assert a.get_computed_block_ids([], _ids(second), skip_last_block_id=False) == []
    a.mark_blocks_as_computed([])  # the second request's prefill wrote it
    assert a.get_computed_block_ids([], _ids(second), skip_last_block_id=False) == [0]


def test_eviction_forgets_that_an_id_was_unwritten() -> None:
    a = PrefixCachingBlockAllocator(num_blocks=1, block_size=1)
    a.free(a.allocate_immutable_block(None, [1]))
    other = a.allocate_immutable_block(None, [2])  # evicts id 0, caches new content on it
    assert other.block_id == 0 and a._unwritten == set()
    a.mark_blocks_as_computed([])
    a.free(other)
    assert a.block_is_computed(0)


def test_reset_forgets_unwritten_ids() -> None:
    a = PrefixCachingBlockAllocator(num_blocks=2, block_size=1)
    a.free(a.allocate_immutable_block(None, [1]))
    assert a.reset_prefix_cache() and a._unwritten == set()


def test_promotion_does_not_move_onto_an_unwritten_duplicate() -> None:
    """A decoding block that fills with content cached on an id nobody wrote keeps its own
    id (its earlier tokens' KV is there); the unwritten entry leaves the cache."""
    a = PrefixCachingBlockAllocator(num_blocks=4, block_size=2)
    a.free(a.allocate_immutable_block(None, [5, 6]))
    block = a.allocate_mutable_block(None)
    own = block.block_id
    block.append_token_ids([5])
    a.mark_blocks_as_computed([])  # the decode step that wrote token 5 ran
    free = a.get_num_free_blocks()
    block.append_token_ids([6])
    assert block.block_id == own != 0
    assert 0 not in a.evictor and 0 in a._hashless_allocator._free_block_indices
    assert a._cached_blocks[block.content_hash] == own  # type: ignore[index]
    assert a.get_num_free_blocks() == free and a._unwritten == set()
    assert a._touched_blocks == {own}
    again = a.allocate_immutable_block(None, [5, 6])
    assert again.block_id == own


def test_promotion_moves_onto_a_written_duplicate() -> None:
    a = PrefixCachingBlockAllocator(num_blocks=4, block_size=2)
    cached = a.allocate_immutable_block(None, [5, 6])
    a.mark_blocks_as_computed([])
    a.free(cached)
    block = a.allocate_mutable_block(None)
    block.append_token_ids([5, 6])
    assert block.block_id == 0 and a.block_is_computed(0)


def _evicted_head() -> tuple[PrefixCachingBlockAllocator, list[int]]:
    """A computed 2-block prompt whose head was evicted while its tail stayed cached,
    requested again (with a mutable last block): ids ``[fresh, 1, mutable]``."""
    a = PrefixCachingBlockAllocator(num_blocks=4, block_size=4)
    head, tail = a.allocate_immutable_blocks(None, [[1, 2, 3, 4], [5, 6, 7, 8]])
    a.mark_blocks_as_computed([])
    a.mark_blocks_as_accessed([tail.block_id], 10.0)  # type: ignore[list-item]
    a.free(tail)
    a.free(head)
    fillers = [a.allocate_mutable_block(None) for _ in range(3)]  # ids 2, 3, then evicts 0
    assert 0 not in a.evictor and a.block_is_computed(1)
    a.free(fillers[-1])
    a.free(fillers[-2])
    chain = a.allocate_immutable_blocks(None, [[1, 2, 3, 4], [5, 6, 7, 8]])
    last = a.allocate_mutable_block(chain[-1])
    ids = _ids(*chain, last)
    assert ids[1] == 1 and ids[0] != 0  # a fresh head, the cached tail
    assert a.find_cached_blocks_prefix([b.content_hash for b in chain]) == []  # type: ignore[misc]
    return a, ids


def test_computed_ids_stop_at_an_evicted_head() -> None:
    """An evicted head: table ``[3, 1, 2]`` must report ``[]`` (upstream: ``[1]``)."""
    a, ids = _evicted_head()
    assert a.get_computed_block_ids([], ids, skip_last_block_id=True) == []
    a.mark_blocks_as_computed([])
    assert a.get_computed_block_ids([], ids, skip_last_block_id=True) == ids[:2]


def test_aphrodite_tracker_list_is_a_prefix() -> None:
    """``get_cached_computed_blocks_and_update`` goes through the same prefix rule, and
    stops extending once the run stops short."""
    a, ids = _evicted_head()
    tracker = ComputedBlocksTracker(a)
    tracker.add_seq(1)
    assert tracker.get_cached_computed_blocks_and_update(1, ids) == []
    a.mark_blocks_as_computed([])
    assert tracker.get_cached_computed_blocks_and_update(1, ids) == []  # the gap is remembered


def test_computed_ids_extend_a_prefix_only() -> None:
    a = PrefixCachingBlockAllocator(num_blocks=8, block_size=1)
    done = a.allocate_immutable_blocks(None, [[1], [2]])
    a.mark_blocks_as_computed([])
    fresh = a.allocate_immutable_blocks(done[-1], [[3]])
    again = a.allocate_immutable_blocks(fresh[-1], [[4]])
    ids = _ids(*done, *fresh, *again)
    prev = [ids[0]]
    assert a.get_computed_block_ids(prev, ids, skip_last_block_id=False) == ids[:2]
    assert prev == ids[:2]  # appended in place, as upstream

