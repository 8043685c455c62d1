"""Input validation and table atomicity (hardening defects B1-B9).

Every misuse here raises its exact typed error before anything changes: the full snapshot
(``_state.snapshot``) of the allocator, the blocks and the tables is compared before and
after. Valid calls that sit next to each misuse (tuples for lists, blocks of another
instance for touched counts, the caller's own list returned) are checked to still work.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixcache import (
    Block,
    BlockTable,
    CpuGpuBlockAllocator,
    Device,
    DoubleFreeError,
    InvalidArgumentError,
    InvalidBlockError,
    NaiveBlock,
    NaiveBlockAllocator,
    NoFreeBlocksError,
    PrefixCacheError,
    PrefixCachingBlockAllocator,
    RefCounter,
    UnknownBlockIdError,
)

from ._state import snapshot

TYPES = ["naive", "prefix_caching"]
BS = 2
WRONG_BLOCKS: tuple[object, ...] = (None, "block", 3, 1.5, [], True)
ALIAS_IDS: tuple[object, ...] = (True, False, 0.0, 1.0, [], (0,))
BAD_EXTRA: tuple[object, ...] = (1.5, "1", True, b"1", [1])


@dataclass
class World:
    """A device-aware allocator with a table, a chain on each device and foreign blocks."""

    alloc: CpuGpuBlockAllocator
    table: BlockTable
    gpu_chain: list[Block]
    cpu_chain: list[Block]
    foreign: list[Block]
    tables: list[BlockTable] = field(default_factory=list)

    @property
    def gpu(self) -> Any:
        return self.alloc._allocators[Device.GPU]

    def blocks(self) -> list[Block]:
        return [*self.gpu_chain, *self.cpu_chain, *self.foreign]

    def state(self) -> dict[str, Any]:
        return snapshot(self.alloc, self.blocks(), [self.table, *self.tables])

    def check(self, call: Callable[[], object], error: type[PrefixCacheError]) -> None:
        """``call`` raises exactly ``error`` and changes nothing."""
        before = self.state()
        with pytest.raises(PrefixCacheError) as info:
            call()
        assert type(info.value) is error, repr(info.value)
        assert self.state() == before


def world(allocator_type: str, gpu_blocks: int = 12) -> World:
    alloc = CpuGpuBlockAllocator.create(allocator_type, gpu_blocks, 4, BS)
    table = BlockTable(BS, alloc)
    table.allocate([1, 2, 3, 4, 5])
    gpu_chain = alloc.allocate_immutable_blocks(None, [[6, 7], [8, 9]], Device.GPU)
    cpu_chain = alloc.allocate_immutable_blocks(None, [[10, 11]], Device.CPU)
    twin = CpuGpuBlockAllocator.create(allocator_type, 4, 0, BS)
    foreign = twin.allocate_immutable_blocks(None, [[12, 13]], Device.GPU)
    return World(alloc, table, gpu_chain, cpu_chain, foreign)


# -- B1: a non-block where a block or a block list is expected --------------------------------


@pytest.mark.parametrize("allocator_type", TYPES)
@pytest.mark.parametrize("value", WRONG_BLOCKS)
def test_free_and_fork_reject_non_blocks(allocator_type: str, value: object) -> None:
    w = world(allocator_type)
    w.check(lambda: w.alloc.free(value), InvalidArgumentError)  # type: ignore[arg-type]
    w.check(lambda: w.alloc.fork(value), InvalidArgumentError)  # type: ignore[arg-type]
    w.check(lambda: w.gpu.free(value), InvalidArgumentError)
    w.check(lambda: w.gpu.fork(value), InvalidArgumentError)
    w.check(lambda: w.gpu.cow_block_if_not_appendable(value), InvalidArgumentError)


@pytest.mark.parametrize("allocator_type", TYPES)
def test_swap_rejects_non_block_lists(allocator_type: str) -> None:
    w = world(allocator_type)
    block = w.gpu_chain[0]
    for value in (None, block, [None], ["block"], [block, 3], 5):
        w.check(lambda v=value: w.alloc.swap(v, Device.GPU, Device.CPU), InvalidArgumentError)
        w.check(lambda v=value: w.gpu.swap_out(v), InvalidArgumentError)
        w.check(lambda v=value: w.gpu.swap_in(v), InvalidArgumentError)


@pytest.mark.parametrize("allocator_type", TYPES)
def test_touched_counts_reject_non_blocks_but_take_any_blocks(allocator_type: str) -> None:
    w = world(allocator_type)
    for value in (None, [None], ["block"], [w.gpu_chain[0], 3], w.gpu_chain[0]):
        for device in (Device.GPU, Device.CPU):
            w.check(
                lambda v=value, d=device: w.alloc.get_num_blocks_touched(v, d, 1),
                InvalidArgumentError,
            )
            w.check(
                lambda v=value, d=device: w.alloc.get_num_full_blocks_touched(v, d),
                InvalidArgumentError,
            )
    # Blocks of another instance and tuples are fine: upstream asks about foreign blocks.
    foreign = tuple(w.foreign)
    assert w.alloc.get_num_full_blocks_touched(foreign, Device.CPU) == 1  # type: ignore[arg-type]
    assert w.alloc.get_num_blocks_touched(list(foreign), Device.CPU) == 1


# -- B2: a non-list where a list is expected ----------------------------------------------------


@pytest.mark.parametrize("allocator_type", TYPES)
@pytest.mark.parametrize("value", [None, 5, 2.5, "ab"])
def test_chunk_lists_must_be_lists(allocator_type: str, value: object) -> None:
    w = world(allocator_type)
    for device in (Device.GPU, Device.CPU):
        w.check(
            lambda d=device: w.alloc.allocate_immutable_blocks(None, value, d),  # type: ignore[arg-type]
            InvalidArgumentError,
        )
        w.check(
            lambda d=device: w.alloc.get_num_free_blocks_needed(None, value, d),  # type: ignore[arg-type]
            InvalidArgumentError,
        )
    # A tuple of chunks is a sequence: accepted.
    blocks = w.alloc.allocate_immutable_blocks(None, ([20, 21],), Device.GPU)  # type: ignore[arg-type]
    assert [b.token_ids for b in blocks] == [[20, 21]]


@pytest.mark.parametrize("value", [None, 5, 2.5])
def test_prefix_queries_take_lists_only(value: object) -> None:
    w = world("prefix_caching")
    a: Any = w.alloc
    ids = [b.block_id for b in w.gpu_chain]
    w.check(lambda: a.mark_blocks_as_accessed(value, 1.0), InvalidArgumentError)
    w.check(lambda: a.find_cached_blocks_prefix(value), InvalidArgumentError)
    w.check(lambda: a.get_computed_block_ids(value, ids, False), InvalidArgumentError)
    w.check(lambda: a.get_computed_block_ids([], value, False), InvalidArgumentError)
    w.check(lambda: a.get_common_computed_block_ids(value), InvalidArgumentError)
    w.check(lambda: a.get_common_computed_block_ids([ids, value]), InvalidArgumentError)


def test_prefix_list_queries_keep_the_callers_list() -> None:
    w = world("prefix_caching")
    w.alloc.mark_blocks_as_computed([])
    ids = [b.block_id for b in w.gpu_chain]
    prev: list[int] = []
    assert w.alloc.get_computed_block_ids(prev, ids, False) is prev
    assert prev == ids
    assert w.alloc.get_computed_block_ids((), tuple(ids), False) == ids  # type: ignore[arg-type]
    only = [ids]
    assert w.alloc.get_common_computed_block_ids(only) is ids
    assert w.alloc.get_common_computed_block_ids([ids, ids[:1], []]) == ids[:1]


def test_naive_bookkeeping_stays_a_no_op() -> None:
    w = world("naive")
    before = w.state()
    w.alloc.mark_blocks_as_accessed(None, 1.0)  # type: ignore[arg-type]
    w.alloc.mark_blocks_as_accessed([True], 1.0)
    assert w.alloc.get_computed_block_ids(None, None, False) == []  # type: ignore[arg-type]
    assert w.alloc.find_cached_blocks_prefix(None) == []  # type: ignore[arg-type]
    assert w.state() == before


# -- B3: bool / float / unhashable ids ---------------------------------------------------------


@pytest.mark.parametrize("allocator_type", TYPES)
@pytest.mark.parametrize("block_id", ALIAS_IDS)
def test_ids_that_alias_an_int_are_unknown(allocator_type: str, block_id: object) -> None:
    w = world(allocator_type)
    w.check(lambda: w.alloc.get_block_refcount(block_id), UnknownBlockIdError)  # type: ignore[arg-type]
    w.check(lambda: w.alloc.get_block_device(block_id), UnknownBlockIdError)  # type: ignore[arg-type]
    w.check(lambda: w.gpu.get_block_refcount(block_id), UnknownBlockIdError)
    w.check(
        lambda: w.alloc.get_physical_block_id(Device.GPU, block_id),  # type: ignore[arg-type]
        UnknownBlockIdError,
    )
    if allocator_type == "naive":
        w.check(lambda: w.gpu.free_block_id(block_id), UnknownBlockIdError)
    else:
        held = w.gpu_chain[0].block_id
        w.check(lambda: w.alloc.mark_blocks_as_accessed([held, block_id], 7.0), UnknownBlockIdError)
        w.check(lambda: w.gpu.block_is_computed(block_id), UnknownBlockIdError)
        w.check(
            lambda: w.alloc.get_computed_block_ids([], [held, block_id], False),
            UnknownBlockIdError,
        )


def test_refcounter_rejects_alias_ids() -> None:
    counter = RefCounter(range(3))
    counter.incr(1)
    for block_id in ALIAS_IDS:
        for op in (counter.get, counter.incr, counter.decr):
            with pytest.raises(UnknownBlockIdError):
                op(block_id)  # type: ignore[arg-type]
    assert counter._refcounts == {0: 0, 1: 1, 2: 0}


# -- B4: bool tokens ---------------------------------------------------------------------------


@pytest.mark.parametrize("allocator_type", TYPES)
def test_bool_tokens_are_rejected(allocator_type: str) -> None:
    w = world(allocator_type)
    tail = w.table.blocks[-1]
    w.tables.append(BlockTable(BS, w.alloc))
    for tokens in ([1, True], [1, False], [False]):
        w.check(
            lambda t=tokens: w.alloc.allocate_immutable_block(None, t, Device.GPU),
            InvalidArgumentError,
        )
        w.check(lambda t=tokens: tail.append_token_ids(t[-1:]), InvalidArgumentError)
        w.check(lambda t=tokens: w.table.append_token_ids(t), InvalidArgumentError)
        w.check(lambda t=tokens: w.tables[0].allocate(t), InvalidArgumentError)
    with pytest.raises(InvalidArgumentError):
        NaiveBlock(None, [True], BS, w.gpu)


# -- B5: BlockTable.free is all or nothing -----------------------------------------------------


@pytest.mark.parametrize("allocator_type", TYPES)
@pytest.mark.parametrize("freed_index", [0, 1, 2])
def test_table_free_with_a_block_freed_behind_it(allocator_type: str, freed_index: int) -> None:
    w = world(allocator_type)
    damaged = w.table.blocks[freed_index]
    w.gpu.free(damaged, keep_block_object=True)
    w.check(w.table.free, DoubleFreeError)
    assert len(w.table.blocks) == 3


@pytest.mark.parametrize("allocator_type", TYPES)
def test_table_free_with_more_handles_than_references(allocator_type: str) -> None:
    w = world(allocator_type)
    first = w.table.blocks[0]
    twin = NaiveBlock(None, list(first.token_ids), BS, w.gpu, block_id=first.block_id)
    table = BlockTable(BS, w.alloc, _blocks=[first, twin])
    w.tables.append(table)
    w.check(table.free, DoubleFreeError)


@pytest.mark.parametrize("allocator_type", TYPES)
def test_table_free_of_shared_handles_still_works(allocator_type: str) -> None:
    w = world(allocator_type)
    fork = w.table.fork()
    free = w.alloc.get_num_free_blocks(Device.GPU)
    fork.free()
    assert w.alloc.get_num_free_blocks(Device.GPU) == free
    w.table.free()
    assert w.table.blocks == []


# -- B6 / B8: extra_hash is validated before anything else ---------------------------------------


@pytest.mark.parametrize("allocator_type", TYPES)
@pytest.mark.parametrize("extra", BAD_EXTRA)
def test_table_validates_extra_hash_first(allocator_type: str, extra: Any) -> None:
    w = world(allocator_type)
    window = BlockTable(BS, w.alloc, max_block_sliding_window=1)
    window.allocate([30, 31, 32, 33, 34])
    w.tables.append(window)
    computed = len(window.blocks) * BS
    w.check(
        lambda: window.append_token_ids([35, 36], num_computed_slots=computed, extra_hash=extra),
        InvalidArgumentError,
    )
    w.check(lambda: w.table.append_token_ids([], extra_hash=extra), InvalidArgumentError)
    w.check(lambda: w.table.ensure_num_empty_slots(0, extra_hash=extra), InvalidArgumentError)
    w.check(lambda: w.table.ensure_num_empty_slots(9, extra_hash=extra), InvalidArgumentError)
    fresh = BlockTable(BS, w.alloc)
    w.tables.append(fresh)
    w.check(lambda: fresh.allocate([40, 41, 42], extra_hash=extra), InvalidArgumentError)


@pytest.mark.parametrize("allocator_type", TYPES)
def test_table_allocate_reports_bad_extra_hash_before_capacity(allocator_type: str) -> None:
    w = world(allocator_type)
    fresh = BlockTable(BS, w.alloc)
    w.tables.append(fresh)
    too_many = list(range(100, 100 + (w.alloc.get_num_free_blocks(Device.CPU) + 2) * BS))
    w.check(lambda: fresh.allocate(too_many, Device.CPU), NoFreeBlocksError)
    w.check(lambda: fresh.allocate(too_many, Device.CPU, 1.5), InvalidArgumentError)  # type: ignore[arg-type]


# -- B7: prev_block of the naive allocator ------------------------------------------------------


def test_naive_prev_block_must_be_a_naive_block() -> None:
    w = world("naive")
    alien = world("prefix_caching").gpu_chain[0]
    for prev in ("block", 3, 1.5, True, alien):
        w.check(lambda p=prev: w.alloc.allocate_mutable_block(p, Device.GPU), InvalidArgumentError)
        w.check(
            lambda p=prev: w.alloc.allocate_immutable_block(p, [50, 51], Device.GPU),
            InvalidArgumentError,
        )
        w.check(
            lambda p=prev: w.alloc.allocate_immutable_blocks(p, [[50, 51]], Device.CPU),
            InvalidArgumentError,
        )
    block = w.alloc.allocate_mutable_block(w.gpu_chain[-1], Device.GPU)
    assert block.prev_block is w.gpu_chain[-1]


def test_naive_allocator_with_a_factory_function_takes_any_block_as_prev() -> None:
    def factory(**kwargs: Any) -> Block:
        return NaiveBlock(**kwargs)

    alloc = NaiveBlockAllocator(factory, 4, BS)
    prefix_block = PrefixCachingBlockAllocator(2, BS).allocate_mutable_block(None)
    block = alloc.allocate_mutable_block(prefix_block)
    assert block.prev_block is prefix_block
    before = snapshot(alloc, [block])
    with pytest.raises(InvalidArgumentError):
        alloc.allocate_mutable_block("block")  # type: ignore[arg-type]
    assert snapshot(alloc, [block]) == before


# -- B9: the sliding window never drops the last block ---------------------------------------


@pytest.mark.parametrize("allocator_type", TYPES)
@pytest.mark.parametrize("lookahead", [0, 1, 2 * BS])
def test_window_that_would_drop_every_block_is_refused(allocator_type: str, lookahead: int) -> None:
    w = world(allocator_type)
    window = BlockTable(BS, w.alloc, max_block_sliding_window=1)
    window.allocate([30, 31, 32, 33, 34])  # 3 blocks, one empty slot
    w.tables.append(window)
    computed = (len(window.blocks) + 1) * BS  # 4 - 1 = 3 = every block
    w.check(
        lambda: window.append_token_ids(
            [], num_lookahead_slots=lookahead, num_computed_slots=computed
        ),
        InvalidArgumentError,
    )
    # Within the tokens it is fine: the last block stays and a new one chains after it.
    window.append_token_ids([35], num_lookahead_slots=BS, num_computed_slots=5)
    window.append_token_ids([], num_computed_slots=6)
    null = w.alloc.null_block
    assert [b is null for b in window.blocks] == [True, True, False, False]
    assert window.blocks[-1].prev_block is window.blocks[-2]


@pytest.mark.parametrize("window_size", [0, -1, True, 1.5, "1"])
def test_window_size_must_be_positive(window_size: Any) -> None:
    alloc = CpuGpuBlockAllocator.create("naive", 2, 0, BS)
    with pytest.raises(InvalidArgumentError):
        BlockTable(BS, alloc, max_block_sliding_window=window_size)


@pytest.mark.parametrize("allocator_type", TYPES)
def test_window_cannot_drop_a_block_still_written(allocator_type: str) -> None:
    """num_computed_slots beyond the tokens that would drop the partial block (or the
    predecessor of a block not yet full) is refused: that block's hash needs the prefix."""
    w = world(allocator_type)
    window = BlockTable(BS, w.alloc, max_block_sliding_window=1)
    window.allocate([30, 31, 32])
    window.ensure_num_empty_slots(3)  # [30, 31] [32, _] [_, _]
    w.tables.append(window)
    w.check(lambda: window.append_token_ids([], num_computed_slots=3 * BS), InvalidArgumentError)
    w.check(lambda: window.append_token_ids([], num_computed_slots=2 * BS), InvalidArgumentError)


@pytest.mark.parametrize("allocator_type", TYPES)
def test_window_drop_of_a_block_freed_behind_the_table(allocator_type: str) -> None:
    w = world(allocator_type)
    window = BlockTable(BS, w.alloc, max_block_sliding_window=1)
    window.allocate([30, 31, 32, 33, 34])
    w.tables.append(window)
    w.gpu.free(window.blocks[0], keep_block_object=True)
    w.check(lambda: window.append_token_ids([35], num_computed_slots=4), DoubleFreeError)


@pytest.mark.parametrize("allocator_type", TYPES)
def test_append_into_a_block_freed_behind_the_table(allocator_type: str) -> None:
    w = world(allocator_type)
    w.gpu.free(w.table.blocks[-1], keep_block_object=True)
    w.check(lambda: w.table.append_token_ids([6]), DoubleFreeError)


def test_append_into_a_stale_block() -> None:
    w = world("naive")
    w.gpu.free_block_id(w.table.blocks[-1].block_id)  # the handle keeps its id
    w.check(lambda: w.table.append_token_ids([6]), InvalidBlockError)


# -- all or nothing under random sliding-window traffic --------------------------------------


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    allocator_type=st.sampled_from(TYPES),
    gpu_blocks=st.integers(3, 10),
    window_size=st.integers(1, 3),
    steps=st.lists(
        st.tuples(
            st.integers(0, 3),  # which table
            st.lists(st.integers(0, 3), max_size=5),  # tokens (repeats share cached blocks)
            st.integers(0, 4),  # lookahead
            st.integers(-2, 3),  # computed slots relative to the table's full slots
            st.booleans(),  # fork that table first
        ),
        max_size=20,
    ),
)
def test_window_appends_are_all_or_nothing(
    allocator_type: str,
    gpu_blocks: int,
    window_size: int,
    steps: list[tuple[int, list[int], int, int, bool]],
) -> None:
    alloc = CpuGpuBlockAllocator.create(allocator_type, gpu_blocks, 0, BS)
    tables: list[BlockTable] = []
    for index, tokens, lookahead, computed_delta, fork in steps:
        if not tables or index >= len(tables):
            table = BlockTable(BS, alloc, max_block_sliding_window=window_size)
            try:
                table.allocate(tokens or [0])
            except NoFreeBlocksError:
                continue
            tables.append(table)
            continue
        table = tables[index]
        if fork:
            with contextlib.suppress(PrefixCacheError):
                tables.append(table.fork())
        computed = max(0, table.num_full_slots + len(tokens) + computed_delta * BS)
        before = snapshot(alloc, tables=tables)
        try:
            table.append_token_ids(
                tokens, num_lookahead_slots=lookahead, num_computed_slots=computed
            )
        except (NoFreeBlocksError, InvalidArgumentError):
            assert snapshot(alloc, tables=tables) == before
            continue
        null = alloc.null_block
        assert table.blocks[-1] is not null
        assert table.physical_block_ids == [b.block_id for b in table.blocks]
        assert len(table.blocks) * BS - table.num_full_slots >= lookahead
    for table in tables:
        table.free()
    in_use = 0 if alloc.null_block is None else 1
    assert alloc.get_num_free_blocks(Device.GPU) == gpu_blocks - in_use


# -- the reset refusal warning can be silenced ---------------------------------------------------


def test_reset_refusal_logs_through_the_module_logger(caplog: pytest.LogCaptureFixture) -> None:
    alloc = PrefixCachingBlockAllocator(2, BS)
    alloc.allocate_mutable_block(None)
    name = "prefixcache.prefix_caching_block"
    with caplog.at_level(logging.WARNING, logger=name):
        assert alloc.reset_prefix_cache() is False
    assert [(r.name, r.levelno) for r in caplog.records] == [(name, logging.WARNING)]
    caplog.clear()
    logger = logging.getLogger(name)
    old_level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with caplog.at_level(logging.WARNING):
            assert alloc.reset_prefix_cache() is False
    finally:
        logger.setLevel(old_level)
    assert caplog.records == []
