"""Misuse of every public operation raises its documented typed error and changes nothing.

A Hypothesis state machine builds realistic state on a ``CpuGpuBlockAllocator`` (naive and
prefix-caching, block sizes 1-3): block tables with appends and forks, raw chains on both
devices, swaps, frees that leave stale handles and evictable cached blocks, access and computed
marks, the null block and a sliding-window table. Between those steps it commits misuse. For each
misuse *kind* the contract is: the exact error class in the table below is raised (every one a
``PrefixCacheError``), or for a documented no-op nothing is raised; and in both cases the full
observable state (``tests.allocator._state.snapshot``: free deques, refcounts, cache map,
evictor order, trackers, touched set, CoW and swap records, hit-rate counters, the null block,
and every block object and table the test holds) is exactly unchanged. Every kind is also run
once more at the end of each example (``teardown``), so each example exercises all of them.

Every check raises ``MisuseViolation`` explicitly (no ``assert``), so the property still holds
under ``python -O``; ``test_property_holds_with_asserts_stripped`` runs it that way.

Cells name the exact class raised, without its ``Error`` suffix (``InvalidArgument`` is
``InvalidArgumentError``); ``no-op`` means accepted with no change (documented for the naive
allocator's prefix-cache bookkeeping and for vLLM's ``BlockTable.free``); ``n/a`` means the call
is not misuse there (or the method does not exist); ``Bn:X`` is known defect Bn (``KNOWN_BUGS``)
whose fix should raise X: the machine skips it, and a strict xfail test pins that it still fails
(untyped error or changed state), so fixing it turns that test red until the cell is updated.

| kind | naive | prefix_caching | misuse |
|---|---|---|---|
| free_twice | DoubleFree | DoubleFree | free a freed handle |
| free_foreign_instance | InvalidBlock | InvalidBlock | free another instance's block |
| free_foreign_implementation | InvalidBlock | InvalidBlock | free the other impl's block |
| free_never_allocated | InvalidBlock | InvalidBlock | free a hand-built block |
| free_forged_id | InvalidBlock | InvalidBlock | free a hand-built held id |
| free_unknown_id | UnknownBlockId | UnknownBlockId | free a hand-built id of no device |
| free_null_block | no-op | no-op | free the null block |
| free_wrong_type | InvalidArgument | InvalidArgument | free None/str/int/float/list |
| device_allocator_not_held | InvalidBlock | InvalidBlock | device free/cow: not its block |
| fork_freed | Fork | Fork | fork a freed handle |
| fork_chain_with_freed_block | Fork | Fork | fork a chain with a freed head |
| fork_null_block | Fork | Fork | fork the null block |
| fork_foreign | InvalidBlock | InvalidBlock | fork a foreign block |
| fork_wrong_type | InvalidArgument | InvalidArgument | fork None/str/int/list |
| unknown_device | UnknownDevice | UnknownDevice | device None/str/int/other Enum |
| device_given_to_single_device | InvalidArgument | InvalidArgument | device arg to one device |
| bad_extra_hash | InvalidArgument | InvalidArgument | allocate, extra_hash not int |
| validation_before_capacity | InvalidArgument | InvalidArgument | bad extra, too few blocks |
| prev_block_wrong_type | InvalidArgument | InvalidArgument | prev_block str/int/other impl |
| immutable_too_many_tokens | BlockFull | InvalidArgument | immutable, block_size+1 tokens |
| immutable_too_few_tokens | n/a | InvalidArgument | immutable, block_size-1 tokens |
| immutable_after_unhashed_prev | n/a | InvalidArgument | immutable after a partial block |
| tokens_not_ints | InvalidArgument | InvalidArgument | tokens not ints / not a list |
| tokens_bool | InvalidArgument | InvalidArgument | bool tokens |
| request_exceeds_free_blocks | NoFreeBlocks | NoFreeBlocks | allocate free+1 new blocks |
| block_lists_not_lists | InvalidArgument | InvalidArgument | chunk list None/int/float |
| append_past_capacity | BlockFull | BlockFull | append empty_slots+1 tokens |
| append_to_full_block | BlockFull | ImmutableBlock | append to a full block |
| append_nothing_to_hashed | n/a | ImmutableBlock | append [] to a hashed block |
| append_to_computed | n/a | ImmutableBlock | append to a computed block |
| append_fills_freed_handle | n/a | InvalidBlock | fill a freed handle |
| null_block_append | ImmutableBlock | ImmutableBlock | append to the null block |
| null_block_set_id | InvalidBlock | InvalidBlock | set the null block's id |
| swap_same_device | Swap | Swap | swap with src == dst |
| swap_from_wrong_device | Swap | Swap | swap blocks not on src |
| swap_mixed_devices | Swap | Swap | swap GPU and CPU blocks |
| swap_foreign_block | Swap | Swap | swap a foreign block |
| swap_freed_handle | Swap | Swap | swap a freed handle |
| swap_null_block | no-op | no-op | swap the null block (skipped) |
| swap_duplicate_object | InvalidArgument | InvalidArgument | swap one object twice |
| swap_without_room | NoFreeBlocks | NoFreeBlocks | swap more than dst can take |
| swap_wrong_types | InvalidArgument | InvalidArgument | swap None/block/[None]/[str] |
| swap_in_block_holding_id | Swap | Swap | swap_in a block with an id |
| swap_out_freed_handle | DoubleFree | DoubleFree | swap_out a freed handle |
| swap_out_other_device_block | InvalidBlock | InvalidBlock | swap_out another device's block |
| promote_unhashed | n/a | InvalidBlock | promote a partial block |
| promote_not_held | n/a | InvalidBlock | promote a foreign block |
| table_append_unallocated | InvalidArgument | InvalidArgument | append, table not allocated |
| table_fork_unallocated | InvalidArgument | InvalidArgument | fork, table not allocated |
| table_ensure_unallocated | InvalidArgument | InvalidArgument | ensure slots, not allocated |
| table_free_unallocated | no-op | no-op | free, table not allocated |
| table_allocate_twice | InvalidArgument | InvalidArgument | allocate an allocated table |
| table_allocate_no_tokens | InvalidArgument | InvalidArgument | allocate no tokens |
| table_bad_lookahead | InvalidArgument | InvalidArgument | lookahead <0/float/bool/str |
| table_bad_empty_slots | InvalidArgument | InvalidArgument | ensure slots <0/float/bool |
| table_append_exceeds_free | NoFreeBlocks | NoFreeBlocks | append/ensure free+1 blocks |
| table_bad_block_size | InvalidArgument | InvalidArgument | block_size 0/<0/bool/float |
| table_block_size_mismatch | BlockFull | InvalidArgument | table block_size != allocator's |
| table_fork_with_freed_block | Fork | Fork | fork, a block freed behind it |
| table_free_with_freed_block | DoubleFree | DoubleFree | free, a block freed behind it |
| table_unvalidated_extra_hash | InvalidArgument | InvalidArgument | append/ensure bad extra |
| window_without_computed_slots | InvalidArgument | InvalidArgument | window, computed unset |
| window_bad_computed_slots | InvalidArgument | InvalidArgument | window, computed <0/bool/beyond |
| window_drops_every_block | InvalidArgument | InvalidArgument | window drops all, lookahead |
| mark_accessed_unknown_id | no-op | UnknownBlockId | mark accessed: id of no GPU block |
| mark_accessed_free_id | no-op | InvalidBlock | mark accessed: hashless-free id |
| mark_accessed_bad_time | no-op | InvalidArgument | mark accessed: NaN/str/None time |
| mark_accessed_alias_ids | no-op | UnknownBlockId | mark accessed: True/0.0/[] ids |
| mark_accessed_ids_not_list | no-op | InvalidArgument | mark accessed: ids None/int |
| physical_id_unknown | UnknownBlockId | UnknownBlockId | physical id of a foreign id |
| id_lookup_unknown | UnknownBlockId | UnknownBlockId | refcount/device of unknown id |
| id_lookup_alias | UnknownBlockId | UnknownBlockId | refcount/device of True/0.0/[] |
| blocks_touched_bad_lookahead | InvalidArgument | InvalidArgument | touched, lookahead <0/float |
| blocks_touched_wrong_types | InvalidArgument | InvalidArgument | touched of None/[None] |
| computed_ids_bad_lengths | no-op | InvalidArgument | computed ids, bad lengths |
| computed_ids_unknown_id | no-op | UnknownBlockId | computed ids with unknown id |
| computed_queries_not_lists | no-op | InvalidArgument | computed/common/find of None |
| block_is_computed_unknown | n/a | UnknownBlockId | block_is_computed(unknown id) |
| is_block_cached_unhashed | n/a | InvalidBlock | is_block_cached(partial) |
| free_block_id_unknown | UnknownBlockId | n/a | free_block_id(unknown id) |
| free_block_id_free | DoubleFree | n/a | free_block_id(free id) |
| free_blocks_needed_bad_length | no-op | InvalidArgument | blocks needed, partial chunk |
| reset_prefix_cache_in_use | no-op | no-op | reset cache while in use |
| bad_constructor_arguments | InvalidArgument | InvalidArgument | bad constructor args |
"""

from __future__ import annotations

import enum
import itertools
import json
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    rule,
    run_state_machine_as_test,
)

from prefixcache import (
    BlockFullError,
    BlockTable,
    CpuGpuBlockAllocator,
    Device,
    DoubleFreeError,
    ForkError,
    ImmutableBlockError,
    InvalidArgumentError,
    InvalidBlockError,
    NaiveBlock,
    NaiveBlockAllocator,
    NoFreeBlocksError,
    PrefixCacheError,
    PrefixCachingBlock,
    PrefixCachingBlockAllocator,
    SwapError,
    UnknownBlockIdError,
    UnknownDeviceError,
)
from prefixcache.interfaces import Block

try:
    from tests.allocator._state import snapshot
except ImportError:  # pragma: no cover - ``tests`` is not a package on this path
    from allocator._state import snapshot  # type: ignore[no-redef, import-not-found]

REPO_ROOT = Path(__file__).resolve().parents[2]

ALLOCATOR_TYPES = ("naive", "prefix_caching")
GPU_BLOCKS = 24
CPU_BLOCKS = 4
#: Full blocks in the anchor chain: more than the CPU has, so swapping it never fits.
ANCHOR_FULL = CPU_BLOCKS + 1


class MisuseViolation(Exception):
    """A misuse was accepted, raised the wrong error, or changed observable state."""


class ForeignDevice(enum.Enum):
    """An enum with the same member names and values as ``Device``, but not it."""

    GPU = 1
    CPU = 2


Pick = Callable[[Sequence[Any]], Any]
Call = Callable[[], object]
ErrorClass = type[PrefixCacheError]


class NoOp:
    """Expectation: the call is accepted and changes nothing."""

    def __repr__(self) -> str:
        return "no-op"


NOOP = NoOp()


@dataclass(frozen=True)
class KnownBug:
    """A misuse the allocator does not yet handle; ``should_raise`` is what the fix raises."""

    should_raise: ErrorClass
    bug: str


Expectation = ErrorClass | NoOp | KnownBug | None


@dataclass(frozen=True)
class Misuse:
    """One kind of misuse: ``build`` draws a concrete call from the world (or None when the
    world has nothing to misuse that way), ``expect`` says what each allocator must do."""

    name: str
    operation: str
    expect: dict[str, Expectation]
    build: Callable[[World, Pick], Call | None]
    #: The world may lack what this kind needs at some step (``build`` then returns None).
    may_skip: bool

    def expectation(self, allocator_type: str) -> Expectation:
        return self.expect[allocator_type]


MISUSES: dict[str, Misuse] = {}


def misuse(
    name: str,
    operation: str,
    naive: Expectation,
    prefix: Expectation,
    *,
    may_skip: bool = False,
) -> Callable[[Callable[[World, Pick], Call | None]], Callable[[World, Pick], Call | None]]:
    def register(
        build: Callable[[World, Pick], Call | None],
    ) -> Callable[[World, Pick], Call | None]:
        if name in MISUSES:
            raise ValueError(f"duplicate misuse kind {name}")
        expect = {"naive": naive, "prefix_caching": prefix}
        MISUSES[name] = Misuse(name, operation, expect, build, may_skip)
        return build

    return register


# -- the world: an allocator in a realistic state, plus fixtures for misuse --------------------


class World:
    """A ``CpuGpuBlockAllocator`` and everything the test holds on it.

    Fixtures built once (never touched by the valid steps): an anchor chain of
    ``ANCHOR_FULL`` full GPU blocks plus a partial tail, a CPU block, a freed handle whose
    successor is still held (a damaged chain), a three-block table whose middle block was freed
    behind its back, a sliding-window table, a never-allocated table, the null block, a computed
    partial block (prefix caching), a freed partial handle, and blocks of a second instance of
    the same allocator and of the other implementation.
    """

    def __init__(self, allocator_type: str, block_size: int) -> None:
        self.allocator_type = allocator_type
        self.prefix = allocator_type == "prefix_caching"
        self.bs = block_size
        self._fresh = itertools.count(1_000_000)
        self._clock = itertools.count(1)
        alloc = CpuGpuBlockAllocator.create(allocator_type, GPU_BLOCKS, CPU_BLOCKS, block_size)
        self.alloc = alloc
        self.gpu: Any = alloc._allocators[Device.GPU]
        self.cpu: Any = alloc._allocators[Device.CPU]
        bs = block_size

        self.anchor = alloc.allocate_immutable_blocks(
            None, [self.fresh(bs) for _ in range(ANCHOR_FULL)], Device.GPU
        )
        self.anchor_tail = alloc.allocate_mutable_block(self.anchor[-1], Device.GPU)
        self.anchor_tail.append_token_ids(self.fresh(bs - 1))
        self.cpu_block = alloc.allocate_immutable_blocks(None, [self.fresh(bs)], Device.CPU)[0]

        head = alloc.allocate_immutable_blocks(None, [self.fresh(bs)], Device.GPU)[0]
        self.damaged_tail = alloc.allocate_mutable_block(head, Device.GPU)
        self.gpu.free(head, keep_block_object=True)
        self.damaged_head = head

        stale = alloc.allocate_mutable_block(None, Device.GPU)
        stale.append_token_ids(self.fresh(bs - 1))
        self.gpu.free(stale, keep_block_object=True)
        self.stale_partial = stale

        self.computed_partial: Block | None = None
        if self.prefix:
            self.computed_partial = alloc.allocate_mutable_block(None, Device.GPU)
            self.computed_partial.computed = True

        self.damaged_table = BlockTable(bs, alloc)
        self.damaged_table.allocate(self.fresh(3 * bs))
        self.gpu.free(self.damaged_table.blocks[1], keep_block_object=True)
        self.window_table = BlockTable(bs, alloc, max_block_sliding_window=1)
        self.window_table.allocate(self.fresh(2 * bs + 1))
        self.never_table = BlockTable(bs, alloc)
        self.null = alloc.allocate_or_get_null_block()

        twin = CpuGpuBlockAllocator.create(allocator_type, GPU_BLOCKS, CPU_BLOCKS, bs)
        other_type = "naive" if self.prefix else "prefix_caching"
        alien = CpuGpuBlockAllocator.create(other_type, GPU_BLOCKS, CPU_BLOCKS, bs)
        self.foreign: list[Block] = []
        for other in (twin, alien):
            self.foreign += other.allocate_immutable_blocks(None, [self.fresh(bs)], Device.GPU)
            self.foreign.append(other.allocate_mutable_block(None, Device.GPU))
        self.foreign_twin = self.foreign[:2]
        self.foreign_alien = self.foreign[2:]

        # State built by the valid steps.
        self.tables: list[BlockTable] = []
        self.freed_tables: list[BlockTable] = []
        self.chains: list[list[Block]] = []
        self.freed_handles: list[Block] = [self.damaged_head, self.stale_partial]

    # -- helpers -------------------------------------------------------------------------------

    def fresh(self, n: int) -> list[int]:
        """``n`` token ids never used before (no cache hit can involve them)."""
        return [next(self._fresh) for _ in range(max(n, 0))]

    def now(self) -> float:
        return float(next(self._clock))

    def fixture_blocks(self) -> list[Block]:
        blocks = [*self.anchor, self.anchor_tail, self.cpu_block, self.damaged_head]
        blocks += [self.damaged_tail, self.stale_partial, self.null]
        if self.computed_partial is not None:
            blocks.append(self.computed_partial)
        return blocks

    def all_blocks(self) -> list[Block]:
        blocks = self.fixture_blocks() + [b for chain in self.chains for b in chain]
        return blocks + self.freed_handles

    def all_tables(self) -> list[BlockTable]:
        fixtures = [self.damaged_table, self.window_table, self.never_table]
        return fixtures + self.tables + self.freed_tables

    def snapshot(self) -> dict[str, Any]:
        return snapshot(self.alloc, self.all_blocks(), self.all_tables())

    def device_of(self, block: Block) -> Device | None:
        block_id = block.block_id
        if block_id is None or block is self.null:
            return None
        return self.alloc.get_block_device(block_id)

    def held(self, device: Device) -> list[Block]:
        """Every block handle the test holds on ``device`` (the null block excluded)."""
        candidates = [*self.anchor, self.anchor_tail, self.cpu_block, self.damaged_tail]
        candidates += [b for chain in self.chains for b in chain]
        candidates += [b for t in self.tables for b in t.blocks]
        return [b for b in candidates if self.device_of(b) is device]

    def held_full(self, device: Device) -> list[Block]:
        return [b for b in self.held(device) if b.is_full]

    def held_partial(self, device: Device) -> list[Block]:
        """Held non-full blocks that can take tokens (not computed)."""
        return [b for b in self.held(device) if not b.is_full and not (self.prefix and b.computed)]

    def freed(self) -> list[Block]:
        """Handles this allocator freed that still hold no id (pooled objects may be reused)."""
        owners = (self.gpu, self.cpu)
        return [
            b
            for b in self.freed_handles
            if b.block_id is None and any(getattr(b, "_owner", None) is o for o in owners)
        ]

    def allocated_tables(self, *, window: bool = True) -> list[BlockTable]:
        tables = [self.damaged_table, *self.tables]
        if window:
            tables.append(self.window_table)
        return tables

    def unallocated_tables(self) -> list[BlockTable]:
        return [self.never_table, *self.freed_tables]

    def never_allocated_block(self, pick: Pick, block_id: int | None = None) -> Block:
        block_type = pick([NaiveBlock, PrefixCachingBlock] if self.prefix else [NaiveBlock])
        return block_type(None, [], self.bs, self.gpu, block_id=block_id)  # type: ignore[no-any-return]

    def free_count(self, device: Device) -> int:
        return self.alloc.get_num_free_blocks(device)


def check_misuse(world: World, kind: Misuse, call: Call) -> None:
    """Run ``call``; require the expected outcome and an unchanged snapshot."""
    expected = kind.expectation(world.allocator_type)
    if expected is None or isinstance(expected, KnownBug):
        raise MisuseViolation(f"{kind.name} is not runnable on {world.allocator_type}")
    before = world.snapshot()
    try:
        call()
    except Exception as exc:
        if isinstance(expected, NoOp) or type(exc) is not expected:
            raise MisuseViolation(
                f"{kind.name} ({world.allocator_type}): expected {expected!r}, "
                f"got {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(exc, PrefixCacheError):  # pragma: no cover - expected is typed
            raise MisuseViolation(f"{kind.name}: {type(exc).__name__} is untyped") from exc
    else:
        if not isinstance(expected, NoOp):
            raise MisuseViolation(
                f"{kind.name} ({world.allocator_type}): expected {expected.__name__}, "
                "nothing was raised"
            )
    after = world.snapshot()
    if after != before:
        raise MisuseViolation(
            f"{kind.name} ({world.allocator_type}) changed state: {_diff(before, after)}"
        )
    EXERCISED[(world.allocator_type, kind.name)] += 1


def _diff(before: object, after: object, path: str = "") -> str:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=repr):
            if before.get(key) != after.get(key):
                return _diff(before.get(key), after.get(key), f"{path}/{key}")
    return f"{path}: {before!r} -> {after!r}"


#: (allocator type, kind) -> times checked in this process.
EXERCISED: Counter[tuple[str, str]] = Counter()


def runnable(allocator_type: str) -> list[Misuse]:
    return [k for k in MISUSES.values() if isinstance(k.expectation(allocator_type), type | NoOp)]


def seeded_pick(seed: int) -> Pick:
    rng = random.Random(seed)

    def pick(options: Sequence[Any]) -> Any:
        return rng.choice(list(options))

    return pick


def sweep(world: World, pick: Pick) -> None:
    """Run every runnable kind once against the current state."""
    for kind in runnable(world.allocator_type):
        call = kind.build(world, pick)
        if call is None:
            if not kind.may_skip:
                raise MisuseViolation(f"{kind.name} found nothing to misuse")
            continue
        check_misuse(world, kind, call)


# -- misuse kinds ------------------------------------------------------------------------------

WRONG_BLOCKS: tuple[object, ...] = (None, "block", 3, 1.5, [], True)
BAD_DEVICES: tuple[object, ...] = (None, "GPU", "cpu", 1, 2, ForeignDevice.GPU, ForeignDevice.CPU)
BAD_EXTRA_HASHES: tuple[object, ...] = (1.5, "1", True, False, b"1", [1], float("nan"))
BAD_COUNTS: tuple[object, ...] = (-1, -7, 1.5, True, False, "1", None)
BAD_TIMES: tuple[object, ...] = (float("nan"), "1", None, True, 2**53 + 1, [1.0])
ALIAS_IDS: tuple[object, ...] = (True, False, 0.0, 1.0)
BAD_TOKEN_ITEMS: tuple[object, ...] = ("a", 1.5, None, b"x", [1], float("nan"))
NOT_TOKEN_LISTS: tuple[object, ...] = (None, "ab", b"ab", 5, 2.5, {1: 2}, frozenset({1}))


def bug(should_raise: ErrorClass, key: str) -> KnownBug:
    return KnownBug(should_raise, key)


#: Ids no device owns (``GPU_BLOCKS`` itself is the first CPU id, added where it is foreign).
UNKNOWN_IDS: tuple[object, ...] = (-1, GPU_BLOCKS + CPU_BLOCKS, 2**64, "0", None, 1.5, (0,))


@misuse("free_twice", "free a freed handle", DoubleFreeError, DoubleFreeError, may_skip=False)
def _free_twice(w: World, pick: Pick) -> Call:
    block = pick(w.freed())  # the fixtures keep at least two freed handles
    return lambda: w.alloc.free(block)


@misuse(
    "free_foreign_instance", "free another instance's block", InvalidBlockError, InvalidBlockError
)
def _free_foreign_instance(w: World, pick: Pick) -> Call:
    block = pick(w.foreign_twin)
    return lambda: w.alloc.free(block)


@misuse(
    "free_foreign_implementation",
    "free the other impl's block",
    InvalidBlockError,
    InvalidBlockError,
)
def _free_foreign_implementation(w: World, pick: Pick) -> Call:
    block = pick(w.foreign_alien)
    return lambda: w.alloc.free(block)


@misuse("free_never_allocated", "free a hand-built block", InvalidBlockError, InvalidBlockError)
def _free_never_allocated(w: World, pick: Pick) -> Call:
    block = w.never_allocated_block(pick)
    return lambda: w.alloc.free(block)


@misuse("free_forged_id", "free a hand-built held id", InvalidBlockError, InvalidBlockError)
def _free_forged_id(w: World, pick: Pick) -> Call:
    held_id = pick([b.block_id for b in w.held(Device.GPU) + w.held(Device.CPU)])
    block = w.never_allocated_block(pick, block_id=held_id)
    return lambda: w.alloc.free(block)


@misuse(
    "free_unknown_id", "free a hand-built id of no device", UnknownBlockIdError, UnknownBlockIdError
)
def _free_unknown_id(w: World, pick: Pick) -> Call:
    block_id = pick([-1, GPU_BLOCKS + CPU_BLOCKS, 2**64])
    block = w.never_allocated_block(pick, block_id=block_id)
    return lambda: w.alloc.free(block)


@misuse("free_null_block", "free the null block", NOOP, NOOP)
def _free_null_block(w: World, pick: Pick) -> Call:
    return lambda: w.alloc.free(w.null)


@misuse(
    "free_wrong_type",
    "free None/str/int/float/list",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _free_wrong_type(w: World, pick: Pick) -> Call:
    value = pick(WRONG_BLOCKS)
    return lambda: w.alloc.free(value)


@misuse(
    "device_allocator_not_held",
    "device free/cow: not its block",
    InvalidBlockError,
    InvalidBlockError,
)
def _device_allocator_not_held(w: World, pick: Pick) -> Call:
    device_allocator, block = pick(
        [(w.gpu, w.cpu_block), (w.cpu, w.anchor[0]), (w.gpu, w.null)]
        + [(w.gpu, b) for b in w.foreign]
    )
    method = pick([device_allocator.free, device_allocator.cow_block_if_not_appendable])
    return lambda: method(block)


@misuse("fork_freed", "fork a freed handle", ForkError, ForkError)
def _fork_freed(w: World, pick: Pick) -> Call:
    block = pick(w.freed())
    return lambda: w.alloc.fork(block)


@misuse("fork_chain_with_freed_block", "fork a chain with a freed head", ForkError, ForkError)
def _fork_chain_with_freed_block(w: World, pick: Pick) -> Call:
    return lambda: w.alloc.fork(w.damaged_tail)


@misuse("fork_null_block", "fork the null block", ForkError, ForkError)
def _fork_null_block(w: World, pick: Pick) -> Call:
    return lambda: w.alloc.fork(w.null)


@misuse("fork_foreign", "fork a foreign block", InvalidBlockError, InvalidBlockError)
def _fork_foreign(w: World, pick: Pick) -> Call:
    block = pick(w.foreign)
    return lambda: w.alloc.fork(block)


@misuse(
    "fork_wrong_type",
    "fork None/str/int/list",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _fork_wrong_type(w: World, pick: Pick) -> Call:
    value = pick((None, "block", 3, [w.anchor[0]]))
    return lambda: w.alloc.fork(value)


@misuse("unknown_device", "device None/str/int/other Enum", UnknownDeviceError, UnknownDeviceError)
def _unknown_device(w: World, pick: Pick) -> Call:
    a = w.alloc
    chunk = w.fresh(w.bs)
    ops: list[Callable[[Any], object]] = [
        lambda d: a.allocate_mutable_block(None, d),
        lambda d: a.allocate_immutable_block(None, chunk, d),
        lambda d: a.allocate_immutable_blocks(None, [chunk], d),
        lambda d: a.get_num_free_blocks(d),
        lambda d: a.get_num_total_blocks(d),
        lambda d: a.get_physical_block_id(d, 0),
        lambda d: a.get_num_blocks_touched([], d),
        lambda d: a.get_num_full_blocks_touched([], d),
        lambda d: a.get_prefix_cache_hit_rate(d),
        lambda d: a.find_cached_blocks_prefix([], d),
        lambda d: a.get_num_free_blocks_needed(None, [chunk], d),
        lambda d: a.swap([], d, Device.CPU),
        lambda d: a.swap([], Device.GPU, d),
        lambda d: BlockTable(w.bs, a).allocate(chunk, device=d),
    ]
    device = pick(BAD_DEVICES)
    if device is not None:  # reset_prefix_cache(None) means "every device"
        ops.append(lambda d: a.reset_prefix_cache(d))
    op = pick(ops)
    return lambda: op(device)


@misuse(
    "device_given_to_single_device",
    "device arg to one device",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _device_given_to_single_device(w: World, pick: Pick) -> Call:
    device_allocator = pick([w.gpu, w.cpu])
    device = pick([Device.GPU, Device.CPU, "GPU"])
    chunk = w.fresh(w.bs)
    op = pick(
        [
            lambda: device_allocator.allocate_mutable_block(None, device),
            lambda: device_allocator.allocate_immutable_block(None, chunk, device),
            lambda: device_allocator.allocate_immutable_blocks(None, [chunk], device),
            lambda: device_allocator.get_num_free_blocks(device),
        ]
    )
    return op  # type: ignore[no-any-return]


@misuse(
    "bad_extra_hash", "allocate, extra_hash not int", InvalidArgumentError, InvalidArgumentError
)
def _bad_extra_hash(w: World, pick: Pick) -> Call:
    a = w.alloc
    extra = pick(BAD_EXTRA_HASHES)
    device = pick([Device.GPU, Device.CPU])
    chunk = w.fresh(w.bs)
    ops: list[Call] = [
        lambda: a.allocate_mutable_block(None, device, extra_hash=extra),
        lambda: a.allocate_immutable_block(None, chunk, device, extra_hash=extra),
        lambda: a.allocate_immutable_blocks(None, [chunk], device, extra_hash=extra),
    ]
    if w.free_count(device) >= 2:  # with less room the naive table reports that first (B8)
        ops.append(lambda: BlockTable(w.bs, a).allocate([*chunk, 1], device, extra))
    return pick(ops)  # type: ignore[no-any-return]


@misuse(
    "validation_before_capacity",
    "bad extra, too few blocks",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _validation_before_capacity(w: World, pick: Pick) -> Call:
    device = pick([Device.GPU, Device.CPU])
    tokens = w.fresh((w.free_count(device) + 1) * w.bs)
    extra = pick(BAD_EXTRA_HASHES)
    return lambda: BlockTable(w.bs, w.alloc).allocate(tokens, device, extra)


@misuse(
    "prev_block_wrong_type",
    "prev_block str/int/other impl",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _prev_block_wrong_type(w: World, pick: Pick) -> Call:
    a = w.alloc
    prev = pick([v for v in WRONG_BLOCKS if v is not None] + [w.foreign_alien[0]])
    chunk = w.fresh(w.bs)
    return pick(  # type: ignore[no-any-return]
        [
            lambda: a.allocate_mutable_block(prev, Device.GPU),
            lambda: a.allocate_immutable_block(prev, chunk, Device.GPU),
            lambda: a.allocate_immutable_blocks(prev, [chunk], Device.GPU),
        ]
    )


@misuse(
    "immutable_too_many_tokens",
    "immutable, block_size+1 tokens",
    BlockFullError,
    InvalidArgumentError,
)
def _immutable_too_many_tokens(w: World, pick: Pick) -> Call:
    a = w.alloc
    device = pick([Device.GPU, Device.CPU])
    long_chunk = w.fresh(w.bs + 1)
    ok_chunk = w.fresh(w.bs)
    return pick(  # type: ignore[no-any-return]
        [
            lambda: a.allocate_immutable_block(None, long_chunk, device),
            lambda: a.allocate_immutable_blocks(None, [ok_chunk, long_chunk], device),
        ]
    )


@misuse("immutable_too_few_tokens", "immutable, block_size-1 tokens", None, InvalidArgumentError)
def _immutable_too_few_tokens(w: World, pick: Pick) -> Call:
    a = w.alloc
    short_chunk = w.fresh(w.bs - 1)
    ok_chunk = w.fresh(w.bs)
    return pick(  # type: ignore[no-any-return]
        [
            lambda: a.allocate_immutable_block(None, short_chunk, Device.GPU),
            lambda: a.allocate_immutable_blocks(None, [ok_chunk, short_chunk], Device.GPU),
            lambda: a.allocate_immutable_blocks(None, [short_chunk, ok_chunk], Device.CPU),
        ]
    )


@misuse(
    "immutable_after_unhashed_prev", "immutable after a partial block", None, InvalidArgumentError
)
def _immutable_after_unhashed_prev(w: World, pick: Pick) -> Call:
    prev = pick(w.held_partial(Device.GPU))
    chunk = w.fresh(w.bs)
    return lambda: w.alloc.allocate_immutable_block(prev, chunk, Device.GPU)


@misuse(
    "tokens_not_ints", "tokens not ints / not a list", InvalidArgumentError, InvalidArgumentError
)
def _tokens_not_ints(w: World, pick: Pick) -> Call:
    a = w.alloc
    if pick([True, False]):
        tokens: Any = [*w.fresh(w.bs - 1), pick(BAD_TOKEN_ITEMS)]
    else:
        tokens = pick(NOT_TOKEN_LISTS)
    block = pick(w.held_partial(Device.GPU) + w.held_partial(Device.CPU))
    table = pick(w.allocated_tables())
    return pick(  # type: ignore[no-any-return]
        [
            lambda: a.allocate_immutable_block(None, tokens, Device.GPU),
            lambda: a.allocate_immutable_blocks(None, [w.fresh(w.bs), tokens], Device.CPU),
            lambda: block.append_token_ids(tokens),
            lambda: BlockTable(w.bs, a).allocate(tokens),
            lambda: table.append_token_ids(tokens),
        ]
    )


@misuse("tokens_bool", "bool tokens", InvalidArgumentError, InvalidArgumentError)
def _tokens_bool(w: World, pick: Pick) -> Call:
    tokens = [pick([True, False]) for _ in range(w.bs)]
    return pick(  # type: ignore[no-any-return]
        [
            lambda: w.alloc.allocate_immutable_block(None, tokens, Device.GPU),
            lambda: w.anchor_tail.append_token_ids(tokens[:1]),
        ]
    )


@misuse(
    "request_exceeds_free_blocks",
    "allocate free+1 new blocks",
    NoFreeBlocksError,
    NoFreeBlocksError,
)
def _request_exceeds_free_blocks(w: World, pick: Pick) -> Call:
    a = w.alloc
    device = pick([Device.GPU, Device.CPU])
    free = w.free_count(device)
    chunks = [w.fresh(w.bs) for _ in range(free + 1)]
    tokens = [t for chunk in chunks for t in chunk]
    ops: list[Call] = [
        lambda: a.allocate_immutable_blocks(None, chunks, device),
        lambda: BlockTable(w.bs, a).allocate(tokens, device=device),
    ]
    if free == 0:
        ops.append(lambda: a.allocate_immutable_block(None, chunks[0], device))
        ops.append(lambda: a.allocate_mutable_block(None, device))
    return pick(ops)  # type: ignore[no-any-return]


@misuse(
    "block_lists_not_lists",
    "chunk list None/int/float",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _block_lists_not_lists(w: World, pick: Pick) -> Call:
    value = pick((None, 5, 2.5))
    return lambda: w.alloc.allocate_immutable_blocks(None, value, Device.GPU)


@misuse("append_past_capacity", "append empty_slots+1 tokens", BlockFullError, BlockFullError)
def _append_past_capacity(w: World, pick: Pick) -> Call:
    block = pick(w.held_partial(Device.GPU) + w.held_partial(Device.CPU))
    tokens = w.fresh(block.num_empty_slots + 1)
    return lambda: block.append_token_ids(tokens)


@misuse("append_to_full_block", "append to a full block", BlockFullError, ImmutableBlockError)
def _append_to_full_block(w: World, pick: Pick) -> Call:
    block = pick(w.held_full(Device.GPU) + w.held_full(Device.CPU))
    tokens = w.fresh(pick([1, 2]))
    return lambda: block.append_token_ids(tokens)


@misuse("append_nothing_to_hashed", "append [] to a hashed block", None, ImmutableBlockError)
def _append_nothing_to_hashed(w: World, pick: Pick) -> Call:
    block = pick(w.held_full(Device.GPU) + w.held_full(Device.CPU))
    return lambda: block.append_token_ids([])


@misuse("append_to_computed", "append to a computed block", None, ImmutableBlockError)
def _append_to_computed(w: World, pick: Pick) -> Call:
    block = w.computed_partial
    if block is None:  # pragma: no cover - built for prefix caching
        raise MisuseViolation("no computed block")
    tokens = w.fresh(pick([0, 1]))
    return lambda: block.append_token_ids(tokens)


@misuse("append_fills_freed_handle", "fill a freed handle", None, InvalidBlockError)
def _append_fills_freed_handle(w: World, pick: Pick) -> Call:
    block = w.stale_partial
    return lambda: block.append_token_ids(w.fresh(block.num_empty_slots))


@misuse("null_block_append", "append to the null block", ImmutableBlockError, ImmutableBlockError)
def _null_block_append(w: World, pick: Pick) -> Call:
    tokens = w.fresh(pick([0, 1]))
    return lambda: w.null.append_token_ids(tokens)


@misuse("null_block_set_id", "set the null block's id", InvalidBlockError, InvalidBlockError)
def _null_block_set_id(w: World, pick: Pick) -> Call:
    value = pick([None, 0, 3, w.null.block_id])

    def set_id() -> None:
        w.null.block_id = value

    return set_id


@misuse("swap_same_device", "swap with src == dst", SwapError, SwapError)
def _swap_same_device(w: World, pick: Pick) -> Call:
    device = pick([Device.GPU, Device.CPU])
    blocks = [pick(w.held(device))]
    return lambda: w.alloc.swap(blocks, device, device)


@misuse("swap_from_wrong_device", "swap blocks not on src", SwapError, SwapError)
def _swap_from_wrong_device(w: World, pick: Pick) -> Call:
    src, dst = pick([(Device.GPU, Device.CPU), (Device.CPU, Device.GPU)])
    block = pick(w.held(dst))
    return lambda: w.alloc.swap([block], src, dst)


@misuse("swap_mixed_devices", "swap GPU and CPU blocks", SwapError, SwapError)
def _swap_mixed_devices(w: World, pick: Pick) -> Call:
    gpu_block = pick(w.held(Device.GPU))
    cpu_block = pick(w.held(Device.CPU))
    blocks = pick([[gpu_block, cpu_block], [cpu_block, gpu_block]])
    src, dst = pick([(Device.GPU, Device.CPU), (Device.CPU, Device.GPU)])
    return lambda: w.alloc.swap(blocks, src, dst)


@misuse("swap_foreign_block", "swap a foreign block", SwapError, SwapError)
def _swap_foreign_block(w: World, pick: Pick) -> Call:
    block = pick(w.foreign)
    return lambda: w.alloc.swap([block], Device.GPU, Device.CPU)


@misuse("swap_freed_handle", "swap a freed handle", SwapError, SwapError)
def _swap_freed_handle(w: World, pick: Pick) -> Call:
    block = pick(w.freed())
    return lambda: w.alloc.swap([block], Device.GPU, Device.CPU)


@misuse("swap_null_block", "swap the null block (skipped)", NOOP, NOOP)
def _swap_null_block(w: World, pick: Pick) -> Call:
    return lambda: w.alloc.swap([w.null], Device.GPU, Device.CPU)


@misuse(
    "swap_duplicate_object", "swap one object twice", InvalidArgumentError, InvalidArgumentError
)
def _swap_duplicate_object(w: World, pick: Pick) -> Call:
    src, dst = pick([(Device.GPU, Device.CPU), (Device.CPU, Device.GPU)])
    block = pick(w.held(src))
    return lambda: w.alloc.swap([block, block], src, dst)


@misuse("swap_without_room", "swap more than dst can take", NoFreeBlocksError, NoFreeBlocksError)
def _swap_without_room(w: World, pick: Pick) -> Call:
    return lambda: w.alloc.swap(list(w.anchor), Device.GPU, Device.CPU)


@misuse(
    "swap_wrong_types",
    "swap None/block/[None]/[str]",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _swap_wrong_types(w: World, pick: Pick) -> Call:
    value = pick([None, w.anchor[0], [None], ["block"], [w.anchor[0], 3]])
    return lambda: w.alloc.swap(value, Device.GPU, Device.CPU)


@misuse("swap_in_block_holding_id", "swap_in a block with an id", SwapError, SwapError)
def _swap_in_block_holding_id(w: World, pick: Pick) -> Call:
    device_allocator = pick([w.gpu, w.cpu])
    block = pick(w.held(Device.GPU) + w.held(Device.CPU))
    return lambda: device_allocator.swap_in([block])


@misuse("swap_out_freed_handle", "swap_out a freed handle", DoubleFreeError, DoubleFreeError)
def _swap_out_freed_handle(w: World, pick: Pick) -> Call:
    block = pick([b for b in w.freed() if getattr(b, "_owner", None) is w.gpu])
    return lambda: w.gpu.swap_out([block])


@misuse(
    "swap_out_other_device_block",
    "swap_out another device's block",
    InvalidBlockError,
    InvalidBlockError,
)
def _swap_out_other_device_block(w: World, pick: Pick) -> Call:
    device_allocator, blocks = pick([(w.gpu, w.held(Device.CPU)), (w.cpu, w.held(Device.GPU))])
    block = pick(blocks)
    return lambda: device_allocator.swap_out([block])


@misuse("promote_unhashed", "promote a partial block", None, InvalidBlockError)
def _promote_unhashed(w: World, pick: Pick) -> Call:
    block = pick(w.held_partial(Device.GPU))
    return lambda: w.gpu.promote_to_immutable_block(block)


@misuse("promote_not_held", "promote a foreign block", None, InvalidBlockError)
def _promote_not_held(w: World, pick: Pick) -> Call:
    block = pick([w.foreign_twin[0], w.cpu_block])
    return lambda: w.gpu.promote_to_immutable_block(block)


@misuse(
    "table_append_unallocated",
    "append, table not allocated",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _table_append_unallocated(w: World, pick: Pick) -> Call:
    table = pick(w.unallocated_tables())
    tokens = w.fresh(pick([0, 1, w.bs + 1]))
    return lambda: table.append_token_ids(tokens)


@misuse(
    "table_fork_unallocated",
    "fork, table not allocated",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _table_fork_unallocated(w: World, pick: Pick) -> Call:
    table = pick(w.unallocated_tables())
    return lambda: table.fork()


@misuse(
    "table_ensure_unallocated",
    "ensure slots, not allocated",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _table_ensure_unallocated(w: World, pick: Pick) -> Call:
    table = pick(w.unallocated_tables())
    count = pick([0, 1, w.bs + 1])
    return lambda: table.ensure_num_empty_slots(count)


@misuse("table_free_unallocated", "free, table not allocated", NOOP, NOOP)
def _table_free_unallocated(w: World, pick: Pick) -> Call:
    table = pick(w.unallocated_tables())
    return lambda: table.free()


@misuse(
    "table_allocate_twice",
    "allocate an allocated table",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _table_allocate_twice(w: World, pick: Pick) -> Call:
    table = pick(w.allocated_tables())
    tokens = w.fresh(pick([1, w.bs + 1]))
    return lambda: table.allocate(tokens)


@misuse(
    "table_allocate_no_tokens", "allocate no tokens", InvalidArgumentError, InvalidArgumentError
)
def _table_allocate_no_tokens(w: World, pick: Pick) -> Call:
    table = pick([w.never_table, BlockTable(w.bs, w.alloc)])
    device = pick([Device.GPU, Device.CPU])
    return lambda: table.allocate([], device=device)


@misuse(
    "table_bad_lookahead", "lookahead <0/float/bool/str", InvalidArgumentError, InvalidArgumentError
)
def _table_bad_lookahead(w: World, pick: Pick) -> Call:
    table = pick(w.allocated_tables(window=False))
    lookahead = pick(BAD_COUNTS)
    tokens = w.fresh(pick([0, 1]))
    return lambda: table.append_token_ids(tokens, num_lookahead_slots=lookahead)


@misuse(
    "table_bad_empty_slots",
    "ensure slots <0/float/bool",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _table_bad_empty_slots(w: World, pick: Pick) -> Call:
    table = pick(w.allocated_tables())
    count = pick(BAD_COUNTS)
    return lambda: table.ensure_num_empty_slots(count)


@misuse(
    "table_append_exceeds_free",
    "append/ensure free+1 blocks",
    NoFreeBlocksError,
    NoFreeBlocksError,
)
def _table_append_exceeds_free(w: World, pick: Pick) -> Call:
    table = pick(w.allocated_tables(window=False))
    empty = len(table.blocks) * w.bs - table.num_full_slots
    extra_blocks = w.free_count(Device.GPU) + 1
    slots = empty + extra_blocks * w.bs
    tokens = w.fresh(slots)
    return pick(  # type: ignore[no-any-return]
        [
            lambda: table.append_token_ids(tokens),
            lambda: table.append_token_ids([], num_lookahead_slots=slots),
            lambda: table.ensure_num_empty_slots(slots),
        ]
    )


@misuse(
    "table_bad_block_size", "block_size 0/<0/bool/float", InvalidArgumentError, InvalidArgumentError
)
def _table_bad_block_size(w: World, pick: Pick) -> Call:
    size = pick([0, -1, -w.bs, True, 1.5, "2", None])
    return lambda: BlockTable(size, w.alloc)


@misuse(
    "table_block_size_mismatch",
    "table block_size != allocator's",
    BlockFullError,
    InvalidArgumentError,
    may_skip=True,
)
def _table_block_size_mismatch(w: World, pick: Pick) -> Call | None:
    # The naive table checks the free count before the chunk sizes: keep room for both.
    if w.free_count(Device.GPU) < 2:
        return None
    tokens = w.fresh(w.bs + 1 + pick([0, 1]))
    return lambda: BlockTable(w.bs + 1, w.alloc).allocate(tokens)


@misuse("table_fork_with_freed_block", "fork, a block freed behind it", ForkError, ForkError)
def _table_fork_with_freed_block(w: World, pick: Pick) -> Call:
    return lambda: w.damaged_table.fork()


@misuse(
    "table_free_with_freed_block",
    "free, a block freed behind it",
    DoubleFreeError,
    DoubleFreeError,
)
def _table_free_with_freed_block(w: World, pick: Pick) -> Call:
    return lambda: w.damaged_table.free()


@misuse(
    "table_unvalidated_extra_hash",
    "append/ensure bad extra",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _table_unvalidated_extra_hash(w: World, pick: Pick) -> Call:
    extra = pick(BAD_EXTRA_HASHES)
    window = w.window_table
    computed = len(window.blocks) * w.bs
    table = pick(w.allocated_tables(window=False))
    return pick(  # type: ignore[no-any-return]
        [
            lambda: window.append_token_ids(
                w.fresh(w.bs), num_computed_slots=computed, extra_hash=extra
            ),
            lambda: table.append_token_ids([], extra_hash=extra),
            lambda: table.ensure_num_empty_slots(0, extra_hash=extra),
        ]
    )


@misuse(
    "window_without_computed_slots",
    "window, computed unset",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _window_without_computed_slots(w: World, pick: Pick) -> Call:
    tokens = w.fresh(pick([0, 1]))
    return lambda: w.window_table.append_token_ids(tokens)


@misuse(
    "window_bad_computed_slots",
    "window, computed <0/bool/beyond",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _window_bad_computed_slots(w: World, pick: Pick) -> Call:
    beyond = (len(w.window_table.blocks) + 2) * w.bs
    computed = pick([-1, True, 1.5, "3", beyond, beyond + 7 * w.bs])
    tokens = w.fresh(1)
    return lambda: w.window_table.append_token_ids(tokens, num_computed_slots=computed)


@misuse(
    "window_drops_every_block",
    "window drops all, lookahead",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _window_drops_every_block(w: World, pick: Pick) -> Call:
    table = w.window_table
    computed = (len(table.blocks) + 1) * w.bs  # end = len(blocks): every block is dropped
    empty = len(table.blocks) * w.bs - table.num_full_slots
    lookahead = empty + pick([1, w.bs])  # needs a new block, chained after a null block
    return lambda: table.append_token_ids(
        [], num_lookahead_slots=lookahead, num_computed_slots=computed
    )


def _held_gpu_id(w: World, pick: Pick) -> int:
    return pick([b.block_id for b in w.held(Device.GPU)])  # type: ignore[no-any-return]


@misuse("mark_accessed_unknown_id", "mark accessed: id of no GPU block", NOOP, UnknownBlockIdError)
def _mark_accessed_unknown_id(w: World, pick: Pick) -> Call:
    ids = [_held_gpu_id(w, pick), pick([*UNKNOWN_IDS, GPU_BLOCKS])]  # GPU_BLOCKS: a CPU id
    if pick([True, False]):
        ids.reverse()
    return lambda: w.alloc.mark_blocks_as_accessed(ids, w.now())


@misuse(
    "mark_accessed_free_id",
    "mark accessed: hashless-free id",
    NOOP,
    InvalidBlockError,
    may_skip=True,
)
def _mark_accessed_free_id(w: World, pick: Pick) -> Call | None:
    if w.prefix:
        free_ids = list(w.gpu._hashless_allocator._free_block_indices)
    else:
        free_ids = list(w.gpu._free_block_indices)
    if not free_ids:
        return None
    ids = [_held_gpu_id(w, pick), pick(free_ids)]
    return lambda: w.alloc.mark_blocks_as_accessed(ids, w.now())


@misuse("mark_accessed_bad_time", "mark accessed: NaN/str/None time", NOOP, InvalidArgumentError)
def _mark_accessed_bad_time(w: World, pick: Pick) -> Call:
    ids = [_held_gpu_id(w, pick)]
    now = pick(BAD_TIMES)
    return lambda: w.alloc.mark_blocks_as_accessed(ids, now)


@misuse(
    "mark_accessed_alias_ids",
    "mark accessed: True/0.0/[] ids",
    NOOP,
    UnknownBlockIdError,
)
def _mark_accessed_alias_ids(w: World, pick: Pick) -> Call:
    ids = [pick([*ALIAS_IDS, []])]
    return lambda: w.alloc.mark_blocks_as_accessed(ids, w.now())


@misuse(
    "mark_accessed_ids_not_list",
    "mark accessed: ids None/int",
    NOOP,
    InvalidArgumentError,
)
def _mark_accessed_ids_not_list(w: World, pick: Pick) -> Call:
    ids = pick([None, 5, 2.5])
    return lambda: w.alloc.mark_blocks_as_accessed(ids, w.now())


@misuse(
    "physical_id_unknown", "physical id of a foreign id", UnknownBlockIdError, UnknownBlockIdError
)
def _physical_id_unknown(w: World, pick: Pick) -> Call:
    device = pick([Device.GPU, Device.CPU])
    other_device_id = pick(
        [b.block_id for b in w.held(Device.CPU if device is Device.GPU else Device.GPU)]
    )
    block_id = pick([*UNKNOWN_IDS, other_device_id, *ALIAS_IDS, []])
    return lambda: w.alloc.get_physical_block_id(device, block_id)


@misuse(
    "id_lookup_unknown", "refcount/device of unknown id", UnknownBlockIdError, UnknownBlockIdError
)
def _id_lookup_unknown(w: World, pick: Pick) -> Call:
    block_id = pick(UNKNOWN_IDS)
    method = pick([w.alloc.get_block_refcount, w.alloc.get_block_device])
    return lambda: method(block_id)


@misuse(
    "id_lookup_alias",
    "refcount/device of True/0.0/[]",
    UnknownBlockIdError,
    UnknownBlockIdError,
)
def _id_lookup_alias(w: World, pick: Pick) -> Call:
    block_id = pick([*ALIAS_IDS, []])
    method = pick([w.alloc.get_block_refcount, w.alloc.get_block_device])
    return lambda: method(block_id)


@misuse(
    "blocks_touched_bad_lookahead",
    "touched, lookahead <0/float",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _blocks_touched_bad_lookahead(w: World, pick: Pick) -> Call:
    device = pick([Device.GPU, Device.CPU])
    blocks = w.held(device)
    lookahead = pick(BAD_COUNTS)
    return lambda: w.alloc.get_num_blocks_touched(blocks, device, lookahead)


@misuse(
    "blocks_touched_wrong_types",
    "touched of None/[None]",
    InvalidArgumentError,
    InvalidArgumentError,
)
def _blocks_touched_wrong_types(w: World, pick: Pick) -> Call:
    value = pick([None, [None], ["block"], [w.anchor[0], 3]])
    method = pick([w.alloc.get_num_blocks_touched, w.alloc.get_num_full_blocks_touched])
    return lambda: method(value, Device.GPU)


@misuse("computed_ids_bad_lengths", "computed ids, bad lengths", NOOP, InvalidArgumentError)
def _computed_ids_bad_lengths(w: World, pick: Pick) -> Call:
    ids = [b.block_id for b in w.anchor]
    prev_ids, block_ids, skip_last = pick(
        [([*ids, ids[0]], ids, False), (ids, ids, True), ([], [], True), (ids[:2], ids[:1], False)]
    )
    return lambda: w.alloc.get_computed_block_ids(list(prev_ids), block_ids, skip_last)


@misuse("computed_ids_unknown_id", "computed ids with unknown id", NOOP, UnknownBlockIdError)
def _computed_ids_unknown_id(w: World, pick: Pick) -> Call:
    ids: list[Any] = [b.block_id for b in w.anchor]
    ids.insert(pick(range(len(ids))), pick([*UNKNOWN_IDS, GPU_BLOCKS]))
    return lambda: w.alloc.get_computed_block_ids([], ids, False)


@misuse(
    "computed_queries_not_lists",
    "computed/common/find of None",
    NOOP,
    InvalidArgumentError,
)
def _computed_queries_not_lists(w: World, pick: Pick) -> Call:
    a = w.alloc
    return pick(  # type: ignore[no-any-return]
        [
            lambda: a.get_computed_block_ids(None, [0, 1], False),  # type: ignore[arg-type]
            lambda: a.get_common_computed_block_ids(None),  # type: ignore[arg-type]
            lambda: a.find_cached_blocks_prefix(None),  # type: ignore[arg-type]
        ]
    )


@misuse("block_is_computed_unknown", "block_is_computed(unknown id)", None, UnknownBlockIdError)
def _block_is_computed_unknown(w: World, pick: Pick) -> Call:
    block_id = pick([*UNKNOWN_IDS, GPU_BLOCKS])
    return lambda: w.gpu.block_is_computed(block_id)


@misuse("is_block_cached_unhashed", "is_block_cached(partial)", None, InvalidBlockError)
def _is_block_cached_unhashed(w: World, pick: Pick) -> Call:
    block = pick(w.held_partial(Device.GPU))
    return lambda: w.gpu.is_block_cached(block)


@misuse("free_block_id_unknown", "free_block_id(unknown id)", UnknownBlockIdError, None)
def _free_block_id_unknown(w: World, pick: Pick) -> Call:
    block_id = pick([-1, GPU_BLOCKS, GPU_BLOCKS + CPU_BLOCKS + 3, "0", None])
    return lambda: w.gpu.free_block_id(block_id)


@misuse("free_block_id_free", "free_block_id(free id)", DoubleFreeError, None, may_skip=True)
def _free_block_id_free(w: World, pick: Pick) -> Call | None:
    free_ids = list(w.gpu._free_block_indices)
    if not free_ids:
        return None
    block_id = pick(free_ids)
    return lambda: w.gpu.free_block_id(block_id)


@misuse("free_blocks_needed_bad_length", "blocks needed, partial chunk", NOOP, InvalidArgumentError)
def _free_blocks_needed_bad_length(w: World, pick: Pick) -> Call:
    chunks = [w.fresh(w.bs), w.fresh(pick([w.bs - 1, w.bs + 1]))]
    device = pick([Device.GPU, Device.CPU])
    return lambda: w.alloc.get_num_free_blocks_needed(None, chunks, device)


@misuse("reset_prefix_cache_in_use", "reset cache while in use", NOOP, NOOP)
def _reset_prefix_cache_in_use(w: World, pick: Pick) -> Call:
    device = pick([None, Device.GPU, Device.CPU])  # both devices always hold a block
    return lambda: w.alloc.reset_prefix_cache(device)


@misuse(
    "bad_constructor_arguments", "bad constructor args", InvalidArgumentError, InvalidArgumentError
)
def _bad_constructor_arguments(w: World, pick: Pick) -> Call:
    bs = w.bs
    return pick(  # type: ignore[no-any-return]
        [
            lambda: CpuGpuBlockAllocator.create("lru", 4, 4, bs),
            lambda: CpuGpuBlockAllocator.create(None, 4, 4, bs),  # type: ignore[arg-type]
            lambda: CpuGpuBlockAllocator.create(w.allocator_type, -1, 4, bs),
            lambda: CpuGpuBlockAllocator.create(w.allocator_type, 4, -1, bs),
            lambda: CpuGpuBlockAllocator.create(w.allocator_type, 4, 4, 0),
            lambda: CpuGpuBlockAllocator.create(w.allocator_type, 4.0, 4, bs),  # type: ignore[arg-type]
            lambda: CpuGpuBlockAllocator.create(w.allocator_type, True, 4, bs),
            lambda: CpuGpuBlockAllocator.create("prefix_caching", 4, 4, bs, "x"),  # type: ignore[arg-type]
            lambda: PrefixCachingBlockAllocator(-1, bs),
            lambda: PrefixCachingBlockAllocator(2, bs, block_ids=[0, 0]),
            lambda: PrefixCachingBlockAllocator(2, bs, block_ids=[-1, 0]),
            lambda: PrefixCachingBlockAllocator(2, bs, block_ids=[0]),
            lambda: NaiveBlockAllocator(NaiveBlock, 2, bs, block_ids=[0, "1"]),  # type: ignore[list-item]
            lambda: NaiveBlockAllocator(NaiveBlock, 2, -bs),
            lambda: CpuGpuBlockAllocator(w.gpu, w.gpu),
            lambda: BlockTable(bs, w.alloc, max_block_sliding_window=-1),
        ]
    )


KNOWN_BUGS: dict[str, str] = {}


# -- the state machine -------------------------------------------------------------------------


class MisuseMachine(RuleBasedStateMachine):
    """Valid steps grow a realistic state; ``commit_misuse`` checks one kind per step and
    ``teardown`` every kind."""

    ALLOCATOR_TYPE = "prefix_caching"

    def __init__(self) -> None:
        super().__init__()
        self.world: World | None = None
        self.sweep_seed = 0

    def _w(self) -> World:
        if self.world is None:  # pragma: no cover - initialize always runs first
            raise MisuseViolation("the world was not built")
        return self.world

    def _valid(self, op: Call) -> object | None:
        """Run a valid operation; running out of blocks is allowed but must change nothing."""
        w = self._w()
        before = w.snapshot()
        try:
            return op()
        except NoFreeBlocksError:
            if w.snapshot() != before:
                raise MisuseViolation(
                    f"a failed allocation changed state: {_diff(before, w.snapshot())}"
                ) from None
            return None

    @initialize(block_size=st.sampled_from((1, 2, 3)), seed=st.integers(0, 2**32 - 1))
    def build(self, block_size: int, seed: int) -> None:
        self.world = World(self.ALLOCATOR_TYPE, block_size)
        self.sweep_seed = seed

    @rule(tokens=st.lists(st.integers(0, 2), min_size=1, max_size=10))
    def allocate_table(self, tokens: list[int]) -> None:
        w = self._w()
        table = BlockTable(w.bs, w.alloc)
        self._valid(lambda: table.allocate(tokens))
        if table.blocks:
            w.tables.append(table)

    @rule(
        data=st.data(),
        tokens=st.lists(st.integers(0, 2), max_size=6),
        lookahead=st.integers(0, 3),
    )
    def append_table(self, data: st.DataObject, tokens: list[int], lookahead: int) -> None:
        w = self._w()
        if w.tables:
            table = data.draw(st.sampled_from(w.tables))
            self._valid(lambda: table.append_token_ids(tokens, num_lookahead_slots=lookahead))

    @rule(data=st.data())
    def fork_table(self, data: st.DataObject) -> None:
        w = self._w()
        if w.tables:
            w.tables.append(data.draw(st.sampled_from(w.tables)).fork())

    @rule(data=st.data())
    def free_table(self, data: st.DataObject) -> None:
        w = self._w()
        if w.tables:
            table = w.tables.pop(data.draw(st.integers(0, len(w.tables) - 1)))
            blocks = [b for b in table.blocks if b is not w.null]
            table.free()
            w.freed_tables = [*w.freed_tables[-4:], table]
            w.freed_handles = [*w.freed_handles[:2], *w.freed_handles[2:][-24:], *blocks]

    @rule(
        device=st.sampled_from((Device.GPU, Device.CPU)),
        chunks=st.lists(st.lists(st.integers(0, 2), min_size=3, max_size=3), max_size=3),
        tail=st.lists(st.integers(0, 2), max_size=2),
    )
    def allocate_chain(self, device: Device, chunks: list[list[int]], tail: list[int]) -> None:
        w = self._w()
        full = [chunk[: w.bs] + [0] * (w.bs - len(chunk)) for chunk in chunks]
        tail = tail[: w.bs - 1]
        chain = self._valid(lambda: w.alloc.allocate_immutable_blocks(None, full, device))
        if not isinstance(chain, list):
            return
        blocks: list[Block] = list(chain)
        if tail or not blocks:
            prev = blocks[-1] if blocks else None
            block = self._valid(lambda: w.alloc.allocate_mutable_block(prev, device))
            if isinstance(block, Block):
                block.append_token_ids(tail)
                blocks.append(block)
        if blocks:
            w.chains.append(blocks)

    @rule(device=st.sampled_from((Device.GPU, Device.CPU)))
    def fill_device(self, device: Device) -> None:
        """Take every free block of ``device`` (evicting cached ones) as one-block chains."""
        w = self._w()
        for _ in range(w.free_count(device)):
            w.chains.append([w.alloc.allocate_mutable_block(None, device)])
        if w.free_count(device) != 0:
            raise MisuseViolation(f"{device} still has free blocks after taking them all")

    @rule(data=st.data())
    def fork_chain(self, data: st.DataObject) -> None:
        w = self._w()
        if w.chains:
            chain = data.draw(st.sampled_from(w.chains))
            w.chains.append(w.alloc.fork(chain[-1]))

    @rule(data=st.data())
    def free_chain_tail(self, data: st.DataObject) -> None:
        w = self._w()
        if w.chains:
            index = data.draw(st.integers(0, len(w.chains) - 1))
            chain = w.chains[index]
            block = chain.pop()
            w.alloc.free(block)
            w.freed_handles.append(block)
            if not chain:
                w.chains.pop(index)

    @rule(data=st.data())
    def swap_chain(self, data: st.DataObject) -> None:
        w = self._w()
        if w.chains:
            chain = data.draw(st.sampled_from(w.chains))
            src = w.device_of(chain[0])
            if src is None:  # pragma: no cover - chains only hold held blocks
                raise MisuseViolation("a chain holds a freed block")
            dst = Device.CPU if src is Device.GPU else Device.GPU
            self._valid(lambda: w.alloc.swap(chain, src, dst))

    @rule(data=st.data())
    def mark_accessed(self, data: st.DataObject) -> None:
        w = self._w()
        ids = sorted({b.block_id for b in w.held(Device.GPU) if b.block_id is not None})
        chosen = data.draw(st.lists(st.sampled_from(ids), max_size=4))
        w.alloc.mark_blocks_as_accessed(chosen, w.now())

    @rule()
    def mark_computed(self) -> None:
        self._w().alloc.mark_blocks_as_computed([])

    @rule(data=st.data())
    def commit_misuse(self, data: st.DataObject) -> None:
        w = self._w()
        kind = data.draw(st.sampled_from(runnable(w.allocator_type)), label="kind")
        call = kind.build(w, lambda options: data.draw(st.sampled_from(list(options))))
        if call is None:
            if not kind.may_skip:
                raise MisuseViolation(f"{kind.name} found nothing to misuse")
            return
        check_misuse(w, kind, call)

    def teardown(self) -> None:
        if self.world is not None:
            sweep(self.world, seeded_pick(self.sweep_seed))


class NaiveMisuseMachine(MisuseMachine):
    ALLOCATOR_TYPE = "naive"


class PrefixCachingMisuseMachine(MisuseMachine):
    ALLOCATOR_TYPE = "prefix_caching"


MACHINES: dict[str, type[MisuseMachine]] = {
    "naive": NaiveMisuseMachine,
    "prefix_caching": PrefixCachingMisuseMachine,
}


def machine_settings(max_examples: int, steps: int) -> settings:
    return settings(
        max_examples=max_examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def run_misuse_property(max_examples: int, steps: int) -> dict[str, dict[str, int]]:
    """Run both machines; return how often each kind was checked, per allocator type."""
    EXERCISED.clear()
    for machine in MACHINES.values():
        run_state_machine_as_test(machine, settings=machine_settings(max_examples, steps))
    counts: dict[str, dict[str, int]] = {t: {} for t in ALLOCATOR_TYPES}
    for (allocator_type, name), n in EXERCISED.items():
        counts[allocator_type][name] = n
    return counts


# -- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("allocator_type", ALLOCATOR_TYPES)
def test_misuse_never_changes_state(allocator_type: str) -> None:
    EXERCISED.clear()
    run_state_machine_as_test(MACHINES[allocator_type], settings=machine_settings(30, 40))
    checked = {name for (t, name) in EXERCISED if t == allocator_type}
    expected = {k.name for k in runnable(allocator_type)}
    missing = expected - checked
    if missing:
        raise MisuseViolation(f"kinds never exercised: {sorted(missing)}")


def _docstring_rows() -> dict[str, tuple[str, str, str]]:
    rows: dict[str, tuple[str, str, str]] = {}
    for line in (__doc__ or "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("kind", "---"):
            rows[cells[0]] = (cells[1], cells[2], cells[3])
    return rows


def _label(expectation: Expectation) -> str:
    if expectation is None:
        return "n/a"
    if isinstance(expectation, NoOp):
        return "no-op"
    if isinstance(expectation, KnownBug):
        return f"{expectation.bug}:{expectation.should_raise.__name__.removesuffix('Error')}"
    return expectation.__name__.removesuffix("Error")


def test_docstring_table_matches_the_registry() -> None:
    registry = {
        k.name: (_label(k.expect["naive"]), _label(k.expect["prefix_caching"]), k.operation)
        for k in MISUSES.values()
    }
    rows = _docstring_rows()
    if rows != registry:
        raise MisuseViolation(
            f"docstring and registry differ: {set(rows.items()) ^ set(registry.items())}"
        )
    for k in MISUSES.values():
        for expectation in k.expect.values():
            if isinstance(expectation, KnownBug) and expectation.bug not in KNOWN_BUGS:
                raise MisuseViolation(f"{k.name} names unknown bug {expectation.bug}")
            if isinstance(expectation, type) and not issubclass(expectation, PrefixCacheError):
                raise MisuseViolation(f"{k.name} expects an untyped error")


_KNOWN_BUG_CASES = [
    pytest.param(
        allocator_type,
        name,
        id=f"{allocator_type}-{name}",
        marks=pytest.mark.xfail(
            strict=True, raises=MisuseViolation, reason=KNOWN_BUGS[expectation.bug]
        ),
    )
    for name, kind in MISUSES.items()
    for allocator_type, expectation in kind.expect.items()
    if isinstance(expectation, KnownBug)
]


_NO_KNOWN_BUGS = pytest.param(
    "", "", marks=pytest.mark.skip(reason="KNOWN_BUGS is empty: every misuse kind raises its "
                                          "documented error (nothing to keep failing)"))


@pytest.mark.parametrize(("allocator_type", "name"), _KNOWN_BUG_CASES or [_NO_KNOWN_BUGS])
def test_known_bug_still_present(allocator_type: str, name: str) -> None:
    """Strict xfail: once the bug is fixed this passes (XPASS fails the run); then change the
    kind's cell to the error class and drop it from ``KNOWN_BUGS``."""
    kind = MISUSES[name]
    expectation = kind.expectation(allocator_type)
    if not isinstance(expectation, KnownBug):  # pragma: no cover - filtered above
        return
    fixed = Misuse(
        name, kind.operation, {allocator_type: expectation.should_raise}, kind.build, kind.may_skip
    )
    for seed in range(12):
        world = World(allocator_type, block_size=1 + seed % 3)
        call = kind.build(world, seeded_pick(seed))
        if call is not None:
            check_misuse(world, fixed, call)


_DRIVER = """
import json, sys
from tests.hardening.test_misuse import run_misuse_property
asserts_on = False
try:
    assert False
except AssertionError:
    asserts_on = True
counts = run_misuse_property(max_examples={examples}, steps={steps})
print(json.dumps({{"optimize": sys.flags.optimize, "debug": __debug__,
                  "asserts_on": asserts_on, "counts": counts}}))
"""


def test_property_holds_with_asserts_stripped() -> None:
    """The same property, run by a driver under ``python -O``: asserts are off there, every
    kind is still checked, and every check still holds (they raise explicitly)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT)]))
    env.pop("PYTHONOPTIMIZE", None)
    result = subprocess.run(
        [sys.executable, "-O", "-c", _DRIVER.format(examples=6, steps=25)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        check=False,
        timeout=300,
    )
    if result.returncode != 0:
        raise MisuseViolation(f"python -O run failed:\n{result.stderr[-4000:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    if report["optimize"] != 1 or report["debug"] is not False or report["asserts_on"]:
        raise MisuseViolation(f"asserts were not stripped in the child: {report}")
    for allocator_type in ALLOCATOR_TYPES:
        checked = set(report["counts"][allocator_type])
        missing = {k.name for k in runnable(allocator_type)} - checked
        if missing:
            raise MisuseViolation(f"{allocator_type}: not exercised under -O: {sorted(missing)}")
