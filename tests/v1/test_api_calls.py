"""Public API coverage of the bundled pool: a short run of the pool machine calls every public
method of ``prefixcache.v1.core.block_pool.BlockPool`` from a generated program, apart from the
methods of :data:`NOT_AN_OPERATION`, each with the reason no program needs to call it."""

from __future__ import annotations

from models.families.v1 import ops
from models.families.v1.pool_model import PoolConfig
from properties.families.v1 import api_calls, targets
from properties.families.v1.executor import run_program

# Public methods no generated program has to call, and why. Keep it short: a method added to the
# pool lands here only with a reason, or the machine learns to drive it.
NOT_AN_OPERATION = {
    # Pure queries of state the judge reads and compares with the model after every step
    # (PoolAdapter.snapshot): the observe column counts them; an operation calling them would
    # check nothing more.
    "get_num_free_blocks": "read by the judge after every step (free count vs the model)",
    "get_usage": "read by the judge after every step (usage vs the model)",
    "is_block_writable": "read by the judge after every step, per block (writable vs the model)",
}
# Public helpers (vLLM 0.34's names) the pool's own operations call to build its events: an
# engine calls cache_full_blocks, cache_partial_block and emit_cached_block_events, which the
# programs do; the events they build are judged (extra keys through the router, lookahead
# tokens against the requests' tokens). The internal column counts them.
POOL_HELPERS = {
    "generate_event_extra_keys": "the extra keys of a stored block's event (called by the "
                                 "pool's caching operations; their events are judged)",
    "get_lookahead_token_ids": "the lookahead tokens of a stored block's event, with hash "
                               "lookahead on (called by the pool's caching operations)",
}
# The keyword options of the pool's operations (the adapter passes one only when it is set).
OPTIONS = ("cache_partial_block(replace_existing_hashes)", "free_blocks(evict_first)",
           "cache_full_blocks(block_mask)")
# A short run: about 10 s on a loaded core (the ci profile's own budget is 200 examples);
# at 40 the derandomized run drew cache_partial_block twice, never with replace_existing_hashes.
MAX_EXAMPLES = 80


def test_every_public_method_of_the_bundled_pool_is_called_by_generated_programs() -> None:
    pool = targets.load(targets.DEFAULT_SPEC)
    counts = api_calls.count_calls(pool, "ci", max_examples=MAX_EXAMPLES)
    assert not counts.stopped, counts.stopped  # the bundled pool conforms
    allowed = {**NOT_AN_OPERATION, **POOL_HELPERS}
    assert set(allowed) <= set(counts.methods), "allow-list names a method gone"
    never = [m for m in counts.never_called() if m not in allowed]
    assert not never, (f"public methods no generated program called: {never}\n"
                       + api_calls.table(counts, "bundled pool"))
    for method in NOT_AN_OPERATION:  # the reason holds: the judge does read them
        assert counts.by(method, "observe") > 0, method
    for method in POOL_HELPERS:  # the reason holds: the pool's operations call them
        assert counts.by(method, "internal") > 0, method
    for option in OPTIONS:  # every keyword option a program can pass is passed
        assert counts.options.get(option, 0) > 0, (option, counts.options)
    assert any("lookahead 0" not in c for c in counts.configs), counts.configs
    # caching off (one example in eight) is drawn too, and conforms
    assert any("caching off" in c for c in counts.configs), counts.configs


def test_options_and_configurations_are_counted() -> None:
    pool, counts = api_calls.counting(targets.load(targets.DEFAULT_SPEC))
    config = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2, 6))
    run_program(pool, config, [ops.Req(tuple(range(8))), ops.GetNew(2),
                               ops.CachePartial(0, 2, 4, 1),
                               ops.CachePartial(0, 2, 2, 1, replace=True),
                               ops.Free((1, 2), evict_first=True)])
    assert counts.options == {"cache_partial_block(replace_existing_hashes)": 1,
                              "free_blocks(evict_first)": 1}
    assert counts.by("cache_partial_block", "program") == 2


def test_calls_are_counted_once_per_outside_call_and_attributed() -> None:
    pool, counts = api_calls.counting(targets.load(targets.DEFAULT_SPEC))
    config = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2,))
    ex = run_program(pool, config, [ops.GetNew(2), ops.Free((1, 2)), ops.Probe("double_free", 0)])
    assert counts.by("get_new_blocks", "program") == 1
    assert counts.by("free_blocks", "program") == 1
    assert counts.by("free_blocks", "misuse") == 1  # the probe, on a copy of the pool
    assert counts.by("get_num_free_blocks", "program") == 0
    assert counts.by("get_num_free_blocks", "observe") >= 3  # after each step
    assert "get_num_free_blocks" in counts.never_called()
    assert type(ex.adapter.pool).__name__ == "BlockPool"
    assert "kv_event_classes" not in counts.methods  # a module attribute, not a method


def test_the_cli_prints_a_row_per_public_method(capsys: object) -> None:
    assert api_calls.main(["--max-examples", "3", "--max-steps", "5"]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    for method in api_calls.public_methods(targets.load(targets.DEFAULT_SPEC).pool_cls):
        assert f"\n  {method} " in out, method
    assert "never called by a generated program:" in out


def test_a_method_the_machine_does_not_drive_is_listed_as_never_called() -> None:
    from dataclasses import replace

    bundled = targets.load(targets.DEFAULT_SPEC)
    grown = type("BlockPool", (bundled.pool_cls,), {"compact": lambda self: None})
    counts = api_calls.count_calls(replace(bundled, pool_cls=grown), "ci", max_examples=3,
                                   max_steps=5)
    assert "compact" in counts.never_called()
    assert "  compact " in api_calls.table(counts, "grown") and "never called" in \
        api_calls.table(counts, "grown")
