"""CpuGpuBlockAllocator and NullBlock."""

from __future__ import annotations

import pytest

from prefixcache import (
    CpuGpuBlockAllocator,
    Device,
    InvalidArgumentError,
    NaiveBlock,
    NaiveBlockAllocator,
    NullBlock,
    PrefixCachingBlockAllocator,
    chunk_list,
)


@pytest.mark.parametrize("num_cpu_blocks", [0, 512])
@pytest.mark.parametrize("allocator_type", ["naive", "prefix_caching"])
def test_mutable_allocations_per_device(num_cpu_blocks: int, allocator_type: str) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, 1024, num_cpu_blocks, 16)
    assert alloc.get_num_free_blocks(Device.CPU) == num_cpu_blocks
    assert alloc.get_num_free_blocks(Device.GPU) == 1024
    cpu = [alloc.allocate_mutable_block(None, Device.CPU) for _ in range(num_cpu_blocks)]
    assert (alloc.get_num_free_blocks(Device.CPU), alloc.get_num_free_blocks(Device.GPU)) == (
        0,
        1024,
    )
    gpu = [alloc.allocate_mutable_block(None, device=Device.GPU) for _ in range(1024)]
    assert (alloc.get_num_free_blocks(Device.CPU), alloc.get_num_free_blocks(Device.GPU)) == (0, 0)
    assert {b.block_id for b in gpu} == set(range(1024))
    assert {b.block_id for b in cpu} == set(range(1024, 1024 + num_cpu_blocks))
    for block in cpu:
        alloc.free(block)
    assert (alloc.get_num_free_blocks(Device.CPU), alloc.get_num_free_blocks(Device.GPU)) == (
        num_cpu_blocks,
        0,
    )
    for block in gpu:
        alloc.free(block)
    assert alloc.get_num_free_blocks(Device.GPU) == 1024


@pytest.mark.parametrize("num_cpu_blocks", [0, 512])
@pytest.mark.parametrize("allocator_type", ["naive", "prefix_caching"])
def test_immutable_allocations_per_device(num_cpu_blocks: int, allocator_type: str) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, 1024, num_cpu_blocks, 2)
    tokens = list(range((num_cpu_blocks + 1024) * 2))
    gpu_tokens = chunk_list(tokens[: 1024 * 2], 2)
    cpu_tokens = chunk_list(tokens[1024 * 2 :], 2)
    cpu = [alloc.allocate_immutable_block(None, t, device=Device.CPU) for t in cpu_tokens]
    assert (alloc.get_num_free_blocks(Device.CPU), alloc.get_num_free_blocks(Device.GPU)) == (
        0,
        1024,
    )
    gpu = [alloc.allocate_immutable_block(None, t, device=Device.GPU) for t in gpu_tokens]
    assert alloc.get_num_free_blocks(Device.GPU) == 0
    for block in cpu:
        alloc.free(block)
    assert (alloc.get_num_free_blocks(Device.CPU), alloc.get_num_free_blocks(Device.GPU)) == (
        num_cpu_blocks,
        0,
    )
    for block in gpu:
        alloc.free(block)
    assert alloc.get_num_free_blocks(Device.GPU) == 1024


def test_create_checks_and_layout() -> None:
    with pytest.raises(ValueError):
        CpuGpuBlockAllocator.create("fancy", 4, 4, 4)
    with pytest.raises(InvalidArgumentError):
        CpuGpuBlockAllocator.create("naive", -1, 4, 4)
    with pytest.raises(InvalidArgumentError):
        CpuGpuBlockAllocator.create("naive", 4, 4, 0)
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 3, 2, 4)
    assert alloc.all_block_ids == frozenset(range(5))
    assert alloc.all_block_ids is alloc.all_block_ids
    assert (
        alloc.get_num_total_blocks(Device.GPU) == 3 and alloc.get_num_total_blocks(Device.CPU) == 2
    )
    assert [alloc.get_physical_block_id(Device.GPU, i) for i in range(3)] == [0, 1, 2]
    assert [alloc.get_physical_block_id(Device.CPU, i) for i in (3, 4)] == [0, 1]
    with pytest.raises(ValueError):
        alloc.get_physical_block_id(Device.CPU, 0)
    assert alloc.get_block_device(1) is Device.GPU and alloc.get_block_device(4) is Device.CPU
    assert isinstance(alloc._allocators[Device.GPU], PrefixCachingBlockAllocator)


def test_constructor_requires_disjoint_ids() -> None:
    a = NaiveBlockAllocator(NaiveBlock, 2, 4)
    b = NaiveBlockAllocator(NaiveBlock, 2, 4, block_ids=[1, 2])
    with pytest.raises(InvalidArgumentError):
        CpuGpuBlockAllocator(cpu_block_allocator=a, gpu_block_allocator=b)
    with pytest.raises(InvalidArgumentError):
        CpuGpuBlockAllocator(cpu_block_allocator=a, gpu_block_allocator=a)


def test_hash_function_is_passed_down() -> None:
    def weak(first: bool, prev: int | None, tokens: object, extra: int | None) -> int:
        return 11

    alloc = CpuGpuBlockAllocator.create("prefix_caching", 2, 2, 2, hash_function=weak)
    for device in Device:
        sub = alloc._allocators[device]
        assert isinstance(sub, PrefixCachingBlockAllocator) and sub.hash_function is weak
    assert alloc.allocate_immutable_block(None, [1, 2], Device.GPU).content_hash == 11


def test_gpu_only_operations_and_null_block() -> None:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 4, 4, 2)
    chain = alloc.allocate_immutable_blocks(None, [[1, 2], [3, 4]], Device.GPU)
    ids = [b.block_id for b in chain]
    assert alloc.get_computed_block_ids([], ids, False) == []  # type: ignore[arg-type]
    alloc.mark_blocks_as_computed([])
    assert alloc.get_computed_block_ids([], ids, skip_last_block_id=False) == ids  # type: ignore[arg-type]
    assert alloc.get_common_computed_block_ids([ids, ids[:1]]) == ids[:1]  # type: ignore[list-item]
    alloc.mark_blocks_as_accessed(ids, 2.0)  # type: ignore[arg-type]
    hashes = [b.content_hash for b in chain]
    assert alloc.find_cached_blocks_prefix(hashes) == hashes  # type: ignore[arg-type]
    assert alloc.find_cached_blocks_prefix(hashes, Device.CPU) == []  # type: ignore[arg-type]
    assert alloc.get_prefix_cache_hit_rate(Device.GPU) == 0.0
    assert alloc.get_num_blocks_touched(chain, Device.CPU) == 2
    assert alloc.get_num_blocks_touched(chain, Device.GPU, 0) == 0
    assert alloc.get_num_full_blocks_touched(chain, Device.CPU) == 2
    fork = alloc.fork(chain[-1])
    fork[-1].block_id  # noqa: B018
    assert alloc.get_block_refcount(ids[0]) == 2  # type: ignore[arg-type]
    null = alloc.allocate_or_get_null_block()
    assert isinstance(null, NullBlock) and alloc.allocate_or_get_null_block() is null
    assert alloc.null_block is null
    assert alloc.get_num_free_blocks(Device.GPU) == 1
    alloc.free(null)  # ignored
    assert alloc.get_num_free_blocks(Device.GPU) == 1
    assert null.token_ids == [] and null.num_empty_slots == 2 and not null.is_full
    assert null.prev_block is None and null.content_hash is None and null.extra_hash is None
    assert null.computed is False and null.last_accessed == -1
    null.computed = True
    null.last_accessed = 3.0
    assert null.computed and null.last_accessed == 3.0
    with pytest.raises(NotImplementedError):
        null.num_tokens_total  # noqa: B018
    with pytest.raises(NotImplementedError):
        alloc.cow_block_if_not_appendable(chain[0])
    with pytest.raises(NotImplementedError):
        alloc.promote_to_immutable_block(chain[0])
    alloc.allocate_mutable_block(chain[-1], Device.GPU).append_token_ids([5])
    assert alloc.clear_copy_on_writes() == []


def test_swap_round_trip_preserves_tokens_hashes_and_counts() -> None:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 8, 8, 2)
    chain = alloc.allocate_immutable_blocks(None, [[1, 2], [3, 4]], Device.GPU)
    tail = alloc.allocate_mutable_block(chain[-1], Device.GPU)
    tail.append_token_ids([5])
    blocks = [*chain, tail]
    hashes = [b.content_hash for b in blocks]
    assert alloc.get_num_blocks_touched(blocks, Device.CPU) == 3
    mapping = alloc.swap(blocks, Device.GPU, Device.CPU)
    assert mapping == {0: 8, 1: 9, 2: 10}
    assert [b.block_id for b in blocks] == [8, 9, 10]
    assert alloc.get_num_free_blocks(Device.GPU) == 8
    assert alloc.get_num_free_blocks(Device.CPU) == 5
    back = alloc.swap(blocks, Device.CPU, Device.GPU)
    assert back == {8: 0, 9: 1, 10: 2}
    assert [b.token_ids for b in blocks] == [[1, 2], [3, 4], [5]]
    assert [b.content_hash for b in blocks] == hashes
    assert alloc.get_and_reset_swaps() == [(0, 8), (1, 9), (2, 10), (8, 0), (9, 1), (10, 2)]
    assert alloc.get_and_reset_swaps() == []
    assert alloc.get_num_free_blocks(Device.CPU) == 8
    tail.append_token_ids([6])
    for block in blocks:
        alloc.free(block)
    assert alloc.get_num_free_blocks(Device.GPU) == 8


@pytest.mark.parametrize("allocator_type", ["naive", "prefix_caching"])
def test_forked_handles_keep_sharing_one_destination_id(allocator_type: str) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, 8, 8, 4)
    block = alloc.allocate_mutable_block(None, Device.GPU)
    block.append_token_ids([1, 2])
    fork = alloc.fork(block)[0]
    assert alloc.get_num_blocks_touched([block, fork], Device.CPU) >= 1
    mapping = alloc.swap([block, fork], Device.GPU, Device.CPU)
    assert mapping == {0: 8}
    assert block.block_id == fork.block_id == 8
    assert alloc.get_block_refcount(8) == 2
    assert alloc.get_num_free_blocks(Device.CPU) == 7 and alloc.get_num_free_blocks(Device.GPU) == 8
    alloc.free(block)
    alloc.free(fork)
    assert alloc.get_num_free_blocks(Device.CPU) == 8


def test_reset_prefix_cache_per_device() -> None:
    alloc = CpuGpuBlockAllocator.create("prefix_caching", 4, 4, 2)
    gpu_block = alloc.allocate_immutable_block(None, [1, 2], Device.GPU)
    cpu_block = alloc.allocate_immutable_block(None, [1, 2], Device.CPU)
    assert alloc.reset_prefix_cache() is False
    alloc.free(cpu_block)
    assert alloc.reset_prefix_cache(Device.CPU) is True
    assert alloc.reset_prefix_cache() is False  # GPU still busy
    alloc.free(gpu_block)
    assert alloc.reset_prefix_cache() is True
    naive = CpuGpuBlockAllocator.create("naive", 2, 2, 2)
    assert naive.reset_prefix_cache() is True
    assert naive.get_prefix_cache_hit_rate(Device.GPU) == -1
