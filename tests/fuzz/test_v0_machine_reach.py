"""What the v0 fuzz decoder's productions reached, its one generator (the Hypothesis machines)
reaches: the reach tests of the deleted decoder, one row each.

A row names a production (the operation that reaches the feature), the machine that draws it,
and the zoo mutant only that reach catches. Three things hold for every row: the operation's
class is drawn by that machine's module; the mutant's zoo entry names that machine, so
``tests/test_zoo.py`` catches it there under Hypothesis; and the fuzzers' route (the same
machine fed seeded random bytes, :mod:`fuzz.core.machine_harness`) catches a sample of them
within a few dozen executions, as ``python -m fuzz zoo`` measures for all of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.core.engine import Engine
from fuzz.core.machine_harness import harness_for
from fuzz.families.v0.tools import zoo
from models.families.v0 import operations as ops
from properties.core.targets import load_target

MACHINES = Path(__file__).resolve().parents[2] / "properties" / "families" / "v0" / "machines"

#: production (what the deleted decoder reach test showed) -> (operation kind, machine level,
#: zoo mutant caught only through it).
REACH: dict[str, tuple[str, str, str]] = {
    "a table whose block is chained after an empty one": (
        "table_allocate", "sequence_level", "table_holds_block_twice"),
    "an aborted request: a chain freed before its KV is written": (
        "mark_computed", "block_level", "freed_unwritten_computed"),
    "an allocator constructed over explicit, permuted block ids": (
        "construct", "block_level", "block_ids_assumed_contiguous"),
    "a malformed constructor argument": ("construct", "block_level", "create_accepts_any_type"),
    "a block's content hash recomputed": ("hash_recompute", "block_level",
                                          "public_hash_drops_prefix"),
    "int-subclass token ids": ("allocate_immutable_int_like", "block_level",
                               "int_like_tokens_keyed_apart"),
    "one device's own allocator swapped by hand": (
        "device_swap_misuse", "block_level", "swap_in_takes_held_blocks"),
    "the standalone evictor, tied candidates": ("evictor_evict", "evictor_level",
                                                "evictor_ties_to_shallowest"),
    "the standalone evictor, removal of a non-candidate": (
        "evictor_remove", "evictor_level", "evictor_remove_absent_silent"),
    "the swap log read and reset": ("swap_log", "sequence_level", "swap_log_not_reset"),
    "physical ids of the CPU device": ("id_space", "sequence_level", "physical_id_not_offset"),
    "common computed ids of a batch": ("common_computed_ids", "block_level",
                                       "common_computed_shortest"),
    "a hit burst past the hit-rate window": ("hit_burst", "block_level",
                                             "hit_rate_window_forgets"),
    "a sliding window dropping a block": ("table_append", "sequence_level", "null_block_freed"),
    "a write to the null block": ("null_block_misuse", "sequence_level", "null_block_writable"),
    "block info of a shared block": ("block_info", "block_level", "refcount_caps_at_one"),
    "different salts of one content": ("allocate_immutable", "block_level",
                                       "extra_key_ignores_salt"),
    "a stale mark of a freed id": ("mark_stale_ids", "block_level", "stale_mark_skips_evictor"),
    "handles sharing an id swapped in one call": ("swap", "block_level",
                                                  "swap_splits_shared_ids"),
    "a tracker re-adding a sequence it holds": ("seq_tracker_edit", "sequence_level",
                                                "computed_tracker_readds"),
    "a table's block freed behind its back, then tracked": (
        "table_free_block", "sequence_level", "tracker_keeps_lost_blocks"),
    "the standalone refcounter and copy-on-write tracker": (
        "cow_appendable", "refcount_level", "cow_appendable_shared_by_two"),
    "a decrement at zero": ("ref_decr", "refcount_level", "refcount_decr_clamps_at_zero"),
    "a request key builder given a bool LoRA id": ("malformed", "block_level",
                                                   "key_builder_bool_lora"),
}

#: Rows the machine route catches within :data:`BUDGET` executions (seed 0): one per machine
#: (the evictor and refcount ones the decoder reached through its extension entry).
SAMPLE = ("table_holds_block_twice", "hit_rate_window_forgets", "evictor_remove_absent_silent",
          "cow_appendable_shared_by_two")
BUDGET = 60


@pytest.mark.parametrize(("production", "kind", "level", "mutant"),
                         [(p, *row) for p, row in REACH.items()], ids=list(REACH))
def test_the_machine_draws_the_production_and_the_zoo_catches_it_there(
        production: str, kind: str, level: str, mutant: str) -> None:
    op = ops.OPS_BY_KIND[kind]
    source = (MACHINES / f"{level}.py").read_text(encoding="utf-8")
    assert f"ops.{op.__name__}(" in source, f"{level} draws no {op.__name__}"
    entry = zoo()[mutant]
    assert level in entry.levels, f"{mutant} is not run through {level}: {entry.levels}"


@pytest.mark.parametrize("mutant", SAMPLE)
def test_the_machine_route_catches_a_sample(mutant: str) -> None:
    entry = zoo()[mutant]
    level = next(row[1] for row in REACH.values() if row[2] == mutant)
    harness = harness_for(level, family="v0").bind(load_target(entry.spec))
    stats = Engine(harness.run, harness.seeds(0), seed=0).fuzz(max_execs=BUDGET,
                                                               stop_on_failure=True)
    assert stats.failures, f"{mutant} survived {BUDGET} executions of {level}"
    violation = stats.failures[0].result.violation
    assert violation is not None and violation.family.value in entry.invariants, violation
