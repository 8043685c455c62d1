"""``BlockTable``'s shortcuts for the bundled allocator (in ``append_token_ids``: the
in-frame decode step, and ``_append_bundled`` for a fresh block or tokens and lookahead slots
spanning blocks; in ``free``: one pass over held blocks) must be indistinguishable from its
general paths: the same ids, refcounts, cache, evictor order, copy-on-write records, metrics,
block contents and typed errors after every operation of any table program.

The general paths run against a plain subclass of :class:`PrefixCachingBlockAllocator`:
every shortcut tests the allocator's exact type, so that allocator takes none of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixcache import (
    BlockTable,
    CpuGpuBlockAllocator,
    Device,
    DoubleFreeError,
    InvalidArgumentError,
    PrefixCacheError,
    PrefixCachingBlock,
    PrefixCachingBlockAllocator,
)
from prefixcache.interfaces import Block

from ._state import allocator_state, snapshot

BLOCK_SIZE = 4


class _GeneralPath(PrefixCachingBlockAllocator):
    """Behaves exactly like its base; its type turns every table shortcut off."""


def _pair(num_gpu: int, general: bool) -> CpuGpuBlockAllocator:
    kind = _GeneralPath if general else PrefixCachingBlockAllocator
    gpu = kind(num_gpu, BLOCK_SIZE, block_ids=range(num_gpu))
    cpu = kind(4, BLOCK_SIZE, block_ids=range(num_gpu, num_gpu + 4))
    return CpuGpuBlockAllocator(cpu_block_allocator=cpu, gpu_block_allocator=gpu)


def _block(block: Block) -> tuple[Any, ...]:
    return (block.block_id, list(block.token_ids), block.num_tokens_total, block.content_hash,
            block.computed, block.is_full)


# Runs of one token make equal chains (cache hits, promotion onto a cached id) common.
_tokens = st.lists(st.just(0) | st.integers(0, 1), min_size=1, max_size=3 * BLOCK_SIZE) | st.builds(
    lambda n: [0] * n, st.integers(1, 3 * BLOCK_SIZE))
_append = st.tuples(st.just("append"), st.integers(0, 7), _tokens | _tokens.map(lambda t: t[:2]),
                   st.sampled_from([0, 0, 1, 3, BLOCK_SIZE, 2 * BLOCK_SIZE]))
_op = st.one_of(
    st.tuples(st.just("allocate"), _tokens),
    _append,
    _append,
    _append,
    st.tuples(st.just("fork"), st.integers(0, 7)),
    st.tuples(st.just("free"), st.integers(0, 7)),
    st.tuples(st.just("computed"), st.integers(0, 7)),
    st.tuples(st.just("accessed"), st.integers(0, 7)),
    st.tuples(st.just("cows")),
)
# two tables first, so that most operations act on one
_program = st.builds(lambda first, rest: first + rest,
                     st.lists(st.tuples(st.just("allocate"), _tokens), min_size=2, max_size=2),
                     st.lists(_op, min_size=8, max_size=60))


def _run(num_gpu: int, program: list[tuple[Any, ...]], general: bool, mark_each: bool,
         ) -> list[Any]:
    alloc = _pair(num_gpu, general)
    tables: list[BlockTable] = []
    seen: list[Any] = []
    for step, (kind, *args) in enumerate(program):
        result: Any = None
        try:
            if kind == "allocate":
                table = BlockTable(BLOCK_SIZE, alloc)
                table.allocate(list(args[0]))
                tables.append(table)
            elif kind == "cows":
                result = alloc.clear_copy_on_writes()
            elif tables:
                table = tables[args[0] % len(tables)]
                if kind == "append":
                    table.append_token_ids(list(args[1]), num_lookahead_slots=args[2])
                elif kind == "fork":
                    tables.append(table.fork())
                elif kind == "free":
                    table.free()
                    tables.remove(table)
                elif kind == "computed":
                    alloc.mark_blocks_as_computed([])
                    result = alloc.get_computed_block_ids([], table.physical_block_ids, True)
                else:
                    alloc.mark_blocks_as_accessed(table.physical_block_ids, float(step))
        except PrefixCacheError as error:
            result = type(error).__name__
        if mark_each:  # as an engine marks after each step: cached ids become hits
            alloc.mark_blocks_as_computed([])
        seen.append((result, allocator_state(alloc),
                     [(t.physical_block_ids[:], t.num_full_slots, [_block(b) for b in t.blocks])
                      for t in tables]))
    return seen


@settings(max_examples=300, deadline=None)
@given(num_gpu=st.integers(2, 10), program=_program, mark_each=st.booleans())
def test_bundled_tables_match_the_general_path(num_gpu: int, program: list[tuple[Any, ...]],
                                                mark_each: bool) -> None:
    assert _run(num_gpu, program, False, mark_each) == _run(num_gpu, program, True, mark_each)


def test_general_path_allocator_takes_no_shortcut() -> None:
    """The comparison above means something only if the subclass really avoids them."""
    taken: list[bool] = []
    original = BlockTable._append_bundled

    def spy(self: BlockTable, *args: Any) -> bool:
        taken.append(original(self, *args))
        return taken[-1]

    BlockTable._append_bundled = spy  # type: ignore[method-assign]
    try:
        for general in (False, True):
            alloc = _pair(8, general)
            table = BlockTable(BLOCK_SIZE, alloc)
            table.allocate([0, 1])
            before = table.physical_block_ids[:]
            table.append_token_ids([1] * 5, num_lookahead_slots=3)  # spans two new blocks
            assert table.physical_block_ids[:1] == before and len(table.blocks) == 3
    finally:
        BlockTable._append_bundled = original  # type: ignore[method-assign]
    assert taken == [True, False]


def _held_twice(alloc: CpuGpuBlockAllocator, table: BlockTable) -> None:
    table.update([table.blocks[0], table.blocks[0]])


def _forged_second_handle(alloc: CpuGpuBlockAllocator, table: BlockTable) -> None:
    first = table.blocks[0]  # one reference, two handles of its id
    forged = PrefixCachingBlock(None, list(first.token_ids), BLOCK_SIZE, alloc._gpu_allocator,
                                block_id=first.block_id)
    forged._owner = first._owner  # type: ignore[attr-defined]
    table.update([first, forged])


def _stale_handle(alloc: CpuGpuBlockAllocator, table: BlockTable) -> None:
    block = table.blocks[-1]
    block_id = block.block_id
    alloc.free(block)
    block.block_id = block_id  # its id has refcount 0 now


@pytest.mark.parametrize(("misuse", "error"), [
    (_held_twice, InvalidArgumentError),
    (_forged_second_handle, DoubleFreeError),
    (_stale_handle, DoubleFreeError),
])
def test_table_free_refuses_misuse_and_changes_nothing(
        misuse: Callable[[CpuGpuBlockAllocator, BlockTable], None],
        error: type[Exception]) -> None:
    alloc = _pair(8, general=False)
    table = BlockTable(BLOCK_SIZE, alloc)
    table.allocate([0, 1, 0, 1, 1])
    misuse(alloc, table)
    before = snapshot(alloc, tables=[table])
    with pytest.raises(error):
        table.free()
    assert snapshot(alloc, tables=[table]) == before


def test_table_free_of_two_held_handles_of_one_id() -> None:
    """An id a table holds twice with a reference each is freed twice (the general path)."""
    alloc = _pair(8, general=False)
    table = BlockTable(BLOCK_SIZE, alloc)
    table.allocate([0, 1, 0, 1])
    (block,) = table.blocks
    (second,) = alloc.fork(block)
    table.update([block, second])
    block_id = table.physical_block_ids[0]
    assert table.physical_block_ids == [block_id, block_id]
    assert alloc.get_block_refcount(block_id) == 2
    table.free()
    assert alloc.get_block_refcount(block_id) == 0
    assert alloc.get_num_free_blocks(Device.GPU) == 8
