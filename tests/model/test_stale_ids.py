"""Stale id lists (``MarkStaleIds``), swaps of handles sharing an id, one-tracker edits
(``SeqTrackerEdit``) and a freed sequence's computed ids: the model against the bundled
allocator, vLLM 0.8 and broken allocators of the zoo that each break one rule."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import pytest

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.contract import misuse_or_out
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, ErrorKind, Op
from models.families.v0.oracle import Oracle, OutOfContract
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0.runner import Runner
from tests.model.judged import run_judged

F = Family
VLLM = "properties.upstream:vllm_v0_allocator"


#: ``run_judged`` on this module's default pool shape.
_run = partial(run_judged, shape=(1, 3, 2))


def _zoo(name: str) -> str:
    return f"tests.zoo.v0.broken:{name}"


#: Two one-token cached blocks chained (handles 0, 1), both freed first block first: ids 0, 1
#: are evictable at the same time, and id 1 (the deeper block) is the next victim.
FREED_CHAIN: list[Op] = [ops.AllocateImmutableChain(None, ((1,), (2,))), ops.Free(0),
                         ops.Free(1)]


# --------------------------------------------------------------------------- MarkStaleIds


def test_marking_a_freed_cached_id_moves_it_in_the_lru_order() -> None:
    """Marked later, the deepest block stops being the next victim: id 0 goes first."""
    program = [*FREED_CHAIN, ops.MarkStaleIds((1,), 5.0), ops.AllocateMutable(None)]
    _, oracle = _run(program, shape=(1, 2, 0))
    assert oracle.model.blocks[2].id == 0
    assert oracle.model.pools[Dev.GPU].evictor.rank(1) == (5.0, -2)


def test_a_target_that_ignores_the_mark_evicts_the_wrong_block() -> None:
    program = [*FREED_CHAIN, ops.MarkStaleIds((1,), 5.0), ops.AllocateMutable(None)]
    with pytest.raises(Violation) as err:
        _run(program, _zoo("stale_mark_skips_evictor"), shape=(1, 2, 0))
    assert err.value.family is F.LRU


def test_an_id_held_again_is_marked_as_its_new_block() -> None:
    """Handle 0's id is cached; a hit hands it to handle 1: the stale mark stamps it."""
    program = [ops.AllocateImmutable(None, (1,)), ops.Free(0), ops.AllocateImmutable(None, (1,)),
               ops.MarkStaleIds((0,), 3.0)]
    values, oracle = _run(program)
    assert values[-1] == (None, None)
    assert oracle.model.pools[Dev.GPU].accessed[0] == 3.0


@pytest.mark.parametrize("blocks", [(1,), (0, 1), (1, 0)])
def test_a_free_id_is_refused_even_after_valid_ones(blocks: tuple[int, ...]) -> None:
    """Handle 1's id went back to the free pool (a mutable block is not cached): the whole
    list is refused, the cached id 0 of handle 0 keeps its rank."""
    program = [ops.AllocateImmutable(None, (1,)), ops.AllocateMutable(None), ops.Free(0),
               ops.Free(1), ops.MarkStaleIds(blocks, 7.0)]
    values, oracle = _run(program)
    assert values[-1][0] is ErrorKind.MISUSE
    assert oracle.model.pools[Dev.GPU].evictor.rank(0) == (-1.0, -1)


def test_a_target_that_skips_free_ids_is_caught() -> None:
    program = [ops.AllocateMutable(None), ops.Free(0), ops.MarkStaleIds((0,), 1.0)]
    with pytest.raises(Violation) as err:
        _run(program, _zoo("stale_mark_ignores_free_ids"))
    assert err.value.family is F.LRU


def test_a_cpu_id_is_refused_and_the_naive_allocator_ignores_every_id() -> None:
    program = [ops.AllocateMutable(None, Dev.CPU), ops.Free(0), ops.MarkStaleIds((0,), 1.0)]
    values, _ = _run(program)
    assert values[-1][0] is ErrorKind.MISUSE
    values, _ = _run(program, allocator_type="naive")
    assert values[-1] == (None, None)


def test_a_handle_never_freed_with_an_id_is_out_of_contract() -> None:
    oracle = Oracle(Config(1, 2, 0, load_target(DEFAULT_SPEC).caps))
    assert oracle.contract_error(ops.MarkStaleIds((0,), 1.0)) is not None
    with pytest.raises(OutOfContract):
        oracle.step(ops.MarkStaleIds((0,), 1.0), ops.Outcome(), ops.Snapshot({}))


def test_vllm_keeps_a_marked_evictable_id_but_cannot_evict_it() -> None:
    """vLLM 0.8's ``LRUEvictor.update`` changes the time in its free table but leaves the
    heap entry stale, so the marked id is never evicted: the allocation fails although the
    pool reports a free block (reported to the lead as a finding)."""
    program = [ops.AllocateImmutable(None, (1,)), ops.Free(0), ops.MarkStaleIds((0,), 1.0),
               ops.AllocateMutable(None)]
    with pytest.raises(Violation) as err:
        _run(program, VLLM, shape=(1, 1, 0))
    assert err.value.family is F.CRASH
    assert "No usable cache memory left" in str(err.value)


# --------------------------------------------------------------------------- shared swaps

#: A one-token block and its fork share GPU id 0 (partial, refcount 2).
SHARED: list[Op] = [ops.AllocateMutable(None), ops.Append(0, (1,)), ops.Fork(0)]


def test_handles_sharing_an_id_move_once_and_keep_sharing() -> None:
    program = [*SHARED, ops.Swap((0, 1), Dev.GPU, Dev.CPU), ops.BlockInfo((0, 1)), ops.SwapLog(),
               ops.Swap((1, 0), Dev.CPU, Dev.GPU)]
    values, oracle = _run(program, shape=(2, 4, 4))
    assert values[3] == (None, [[0, 4]])
    assert values[4] == (None, [[2, "cpu"], [2, "cpu"]])
    assert values[5] == (None, [[0, 4]])
    assert values[6] == (None, [[4, 0]])
    assert oracle.model.refcount[0] == 2


def test_full_shared_blocks_query_the_cache_once() -> None:
    """A cached block and its fork swapped together: one destination id, and no cache query
    (a swap-in is no admission)."""
    program = [ops.AllocateImmutable(None, (1, 2)), ops.Fork(0),
               ops.Swap((0, 1), Dev.GPU, Dev.CPU), ops.HitRate(Dev.CPU)]
    values, oracle = _run(program, shape=(2, 4, 4))
    assert values[2] == (None, [[0, 4]])
    assert values[3] == (None, 0.0)
    assert oracle.model.pools[Dev.CPU].queries == 0


def test_a_swap_that_splits_shared_ids_is_caught() -> None:
    with pytest.raises(Violation) as err:
        _run([*SHARED, ops.Swap((0, 1), Dev.GPU, Dev.CPU)], _zoo("swap_splits_shared_ids"),
             shape=(2, 4, 4))
    assert err.value.family in (F.SWAP, F.RC, F.LEAK)


def test_vllm_splits_shared_ids_so_it_is_not_asked() -> None:
    """vLLM 0.8 claims no atomicity: it splits the shared id as docs/API.md §4.5 says (two CPU
    ids, the mapping keeps the last pair), and the contract leaves such a swap out."""
    target = load_target(VLLM)
    config = Config(2, 4, 4, target.caps)
    runner, oracle = Runner(target, config), Oracle(config)
    oracle.initial_check(runner.snapshot())
    for op in SHARED:
        outcome, snapshot = runner.execute(op)
        oracle.step(op, outcome, snapshot)
    swap = ops.Swap((0, 1), Dev.GPU, Dev.CPU)
    assert oracle.contract_error(swap) is not None
    outcome, snapshot = runner.execute(swap)
    assert outcome.value == [[0, 5]]
    assert (snapshot.blocks[0], snapshot.blocks[1]) == (4, 5)


# --------------------------------------------------------------------------- tracker edits

TRACKED: list[Op] = [ops.TableAllocate((1, 2, 3)), ops.TrackerStart(), ops.SeqTrack(0)]


def test_one_tracker_edits_keep_the_other_tracker() -> None:
    """The access entry goes, the computed list stays (and still answers); added back."""
    program = [*TRACKED, ops.SeqTrackerEdit(0, "access", False), ops.SeqComputedIds(0),
               ops.SeqTrackerEdit(0, "access", True), ops.SeqAccess(0, 1.0)]
    values, oracle = _run(program, shape=(1, 4, 0))
    assert all(err is None for err, _ in values)
    entry = oracle.model.seqs.entries[0]
    assert (entry.access, entry.computed) == (True, [])


@pytest.mark.parametrize("edit", [ops.SeqTrackerEdit(0, "computed", True),
                                  ops.SeqTrackerEdit(0, "access", True)])
def test_adding_a_tracked_sequence_is_refused(edit: Op) -> None:
    values, oracle = _run([*TRACKED, edit], shape=(1, 4, 0))
    assert values[-1][0] is ErrorKind.MISUSE
    assert oracle.model.seqs.entries[0].access


def test_removing_an_untracked_sequence_is_refused_only_with_caching() -> None:
    program = [*TRACKED, ops.SeqTrackerEdit(0, "computed", False),
               ops.SeqTrackerEdit(0, "computed", False)]
    values, _ = _run(program, shape=(1, 4, 0))
    assert values[-2][0] is None and values[-1][0] is ErrorKind.MISUSE
    values, _ = _run(program, shape=(1, 4, 0), allocator_type="naive")
    assert values[-1] == (None, None)


def test_a_tracker_that_readds_silently_is_caught() -> None:
    with pytest.raises(Violation) as err:
        _run([*TRACKED, ops.SeqTrackerEdit(0, "computed", True)], _zoo("computed_tracker_readds"),
             shape=(1, 4, 0))
    assert err.value.family is F.COMPUTED


def test_a_freed_sequence_without_a_gap_has_no_computed_ids() -> None:
    """Its table was freed, the computed tracker still holds it: asking is refused."""
    program = [*TRACKED, ops.MarkComputed(), ops.SeqComputedIds(0), ops.TableFree(0),
               ops.SeqComputedIds(0)]
    values, _ = _run(program, shape=(1, 4, 0))
    assert values[-3] == (None, [0, 1])
    assert values[-1][0] is ErrorKind.MISUSE


def test_edits_before_the_trackers_exist_are_out_of_contract() -> None:
    oracle = Oracle(Config(1, 4, 0, load_target(DEFAULT_SPEC).caps))
    assert oracle.contract_error(ops.SeqTrackerEdit(0, "access", True)) is not None


@pytest.mark.parametrize("switch", [True, False])
def test_removing_an_unknown_sequence_without_caching_depends_on_the_trackers_switch(
        switch: bool) -> None:
    """Per capability: a computed tracker built with ``enable_caching`` (vLLM 0.8, the bundled
    allocator) ignores the removal when caching is disabled; one without the switch
    (Aphrodite's) refuses it, so there it is misuse (never fed to a target without typed
    errors), not a call that must succeed."""
    target = load_target(DEFAULT_SPEC, allocator_type="naive")
    assert target.caps.tracker_caching_switch
    config = Config(1, 4, 0, replace(target.caps, tracker_caching_switch=switch))
    runner, oracle = Runner(target, config), Oracle(config)
    oracle.initial_check(runner.snapshot())
    for op in (ops.TableAllocate((1, 2, 3)), ops.TrackerStart()):
        outcome, snapshot = runner.execute(op)
        oracle.step(op, outcome, snapshot)
    why = misuse_or_out(oracle.model, ops.SeqTrackerEdit(0, "computed", False))
    assert (why is None) is switch, why
