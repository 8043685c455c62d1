"""BlockTracker, LastAccessBlocksTracker and ComputedBlocksTracker (both flavours)."""

from __future__ import annotations

from dataclasses import dataclass, field
from unittest.mock import MagicMock

import pytest

from prefixcache import (
    BlockTracker,
    ComputedBlocksTracker,
    CpuGpuBlockAllocator,
    Device,
    InvalidArgumentError,
    InvalidBlockError,
    LastAccessBlocksTracker,
    PrefixCachingBlockAllocator,
    make_extra_hash,
)


def test_block_tracker_state_changes() -> None:
    tracker = BlockTracker()
    assert (tracker.active, tracker.last_accessed, tracker.computed) == (False, -1, False)
    with pytest.raises(InvalidBlockError):
        tracker.disable()
    tracker.enable()
    tracker.computed = True
    tracker.last_accessed = 3.0
    with pytest.raises(InvalidBlockError):
        tracker.enable()
    assert (tracker.active, tracker.last_accessed, tracker.computed) == (True, 3.0, True)
    tracker.disable()
    assert (tracker.active, tracker.last_accessed, tracker.computed) == (False, -1, False)


def test_last_access_tracker_stamps_blocks() -> None:
    alloc = PrefixCachingBlockAllocator(4, 2)
    block = alloc.allocate_immutable_block(None, [1, 2])
    tracker = LastAccessBlocksTracker(alloc)
    tracker.add_seq(1)
    with pytest.raises(InvalidArgumentError):
        tracker.add_seq(1)
    tracker.update_seq_blocks_last_access(1, [0])  # no time recorded yet: nothing
    assert alloc._block_tracker[0].last_accessed == -1
    tracker.update_last_access(1, 7.5)
    tracker.update_seq_blocks_last_access(1, [0])
    assert alloc._block_tracker[0].last_accessed == 7.5
    alloc.free(block)
    assert alloc.evictor.free_table[0].last_accessed == 7.5  # type: ignore[attr-defined]
    tracker.remove_seq(1)
    for op in (
        lambda: tracker.remove_seq(1),
        lambda: tracker.update_last_access(1, 1.0),
        lambda: tracker.update_seq_blocks_last_access(1, [0]),
    ):
        with pytest.raises(InvalidArgumentError):
            op()


def test_computed_blocks_tracker_aphrodite_flavour() -> None:
    alloc = PrefixCachingBlockAllocator(16, 2)
    chain = alloc.allocate_immutable_blocks(None, [[1, 2], [3, 4], [5, 6]])
    alloc.mark_blocks_as_computed([])
    gap = alloc.allocate_mutable_block(chain[-1])
    ids = [b.block_id for b in chain] + [gap.block_id]
    tracker = ComputedBlocksTracker(alloc)
    tracker.add_seq(0)
    with pytest.raises(InvalidArgumentError):
        tracker.add_seq(0)
    assert tracker.get_cached_computed_blocks_and_update(0, ids[:2]) == ids[:1]  # type: ignore[arg-type]
    assert tracker.get_cached_computed_blocks_and_update(0, ids[:2]) == ids[:1]  # type: ignore[arg-type]
    assert tracker.get_cached_computed_blocks_and_update(0, ids) == ids[:3]  # type: ignore[arg-type]
    more = [*ids, alloc.allocate_mutable_block(None).block_id, 0]
    assert tracker.get_cached_computed_blocks_and_update(0, more) == ids[:3]  # type: ignore[arg-type]
    # the mutable id is a gap: once detected, the list stops growing
    assert tracker.get_cached_computed_blocks_and_update(0, [*more, 1]) == ids[:3]  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        tracker.get_cached_computed_blocks_and_update(5, ids)  # type: ignore[arg-type]
    tracker.add_seq(1)
    with pytest.raises(InvalidArgumentError):
        tracker.get_cached_computed_blocks_and_update(1, [])
    tracker.get_cached_computed_blocks_and_update(1, ids)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        tracker.get_cached_computed_blocks_and_update(1, ids[:2])  # type: ignore[arg-type]
    tracker.remove_seq(0)
    with pytest.raises(InvalidArgumentError):
        tracker.remove_seq(0)


@dataclass
class FakeSeq:
    seq_id: int
    tokens: list[int]
    lora: int | None = None
    prefill: bool = True
    extra: list[int] = field(default_factory=list)

    def get_token_ids(self) -> list[int]:
        return self.tokens

    def extra_hash(self) -> int | None:
        return make_extra_hash(lora_id=self.lora)

    def is_prefill(self) -> bool:
        return self.prefill


def test_computed_blocks_tracker_vllm_flavour_with_a_mock() -> None:
    mock = MagicMock(spec=PrefixCachingBlockAllocator)
    tracker = ComputedBlocksTracker(allocator=mock, block_size=4, enable_caching=True)
    seq = FakeSeq(0, [0, 1, 2, 3, 4, 5])
    mock.find_cached_blocks_prefix.return_value = []
    assert tracker.get_num_cached_tokens(seq) == 0
    mock.find_cached_blocks_prefix.return_value = [None]
    assert tracker.get_num_cached_tokens(seq) == 0  # frozen during prefill
    seq.prefill = False
    assert tracker.get_num_cached_tokens(seq) == 4
    seq.tokens += [0, 1, 2]
    mock.find_cached_blocks_prefix.return_value = [None, None]
    assert tracker.get_num_cached_tokens(seq) == 8
    assert len(mock.find_cached_blocks_prefix.call_args.args[0]) == 2
    tracker.remove_seq(0)
    seq = FakeSeq(0, [0, 1, 2, 3, 4, 5])
    mock.find_cached_blocks_prefix.return_value = []
    assert tracker.get_num_cached_tokens(seq) == 0
    disabled = ComputedBlocksTracker(mock, block_size=4, enable_caching=False)
    assert disabled.get_num_cached_tokens(seq) == 0
    disabled.remove_seq(0)
    with pytest.raises(InvalidArgumentError):
        ComputedBlocksTracker(mock).get_num_cached_tokens(seq)


def test_computed_blocks_tracker_hashes_like_the_allocator() -> None:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 16, 16, 4)
    gpu = alloc._allocators[Device.GPU]
    tracker = ComputedBlocksTracker(alloc, block_size=4, enable_caching=True)
    tokens = list(range(16))
    lora = FakeSeq(0, tokens, lora=1)
    gpu.allocate_immutable_blocks(
        None, [tokens[i : i + 4] for i in range(0, 16, 4)], extra_hash=lora.extra_hash()
    )
    alloc.mark_blocks_as_computed([])
    assert tracker.get_num_cached_tokens(FakeSeq(1, tokens)) == 0
    assert tracker.get_num_cached_tokens(FakeSeq(2, tokens, lora=2)) == 0
    assert tracker.get_num_cached_tokens(lora) == 16


def test_computed_blocks_tracker_uses_an_injected_hash() -> None:
    def weak(first: bool, prev: int | None, tokens: object, extra: int | None) -> int:
        return 1 if first else prev + 1  # type: ignore[operator]

    alloc = PrefixCachingBlockAllocator(8, 2, hash_function=weak)
    alloc.allocate_immutable_blocks(None, [[9, 9], [8, 8]])
    alloc.mark_blocks_as_computed([])
    tracker = ComputedBlocksTracker(alloc, block_size=2)
    assert tracker.get_num_cached_tokens(FakeSeq(0, [1, 1, 2, 2, 3])) == 4
