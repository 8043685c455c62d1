"""The evictor-level semantics (``models.families.v0.evictor_model``): each rule judged directly on
hand-made outcomes and evictor states (so a wrong model rule fails here), then end to end on
the bundled allocator's evictor, the capability detection, and JSON round trips."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from models.core.invariants import Invariant, Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Capabilities, Config
from models.families.v0.contract import OutOfContract
from models.families.v0.evictor_model import EvictorModel, Meta
from models.families.v0.invariants import Family
from models.families.v0.operations import ErrorKind, EvictorState, Op, Outcome
from properties.core.replay import run_program
from properties.core.targets import DEFAULT_SPEC, load_target

F = Family
TYPED = Capabilities()
UNTYPED = Capabilities(atomic=False, typed_errors=False)


def _state(table: Mapping[int, Meta], count: int | None = None) -> EvictorState:
    return EvictorState(len(table) if count is None else count, dict(table))


def _model(adds: Sequence[tuple[int, int, int, float]], caps: Capabilities = TYPED,
           ) -> EvictorModel:
    """A model holding ``adds`` (id, hash, tokens, time), each judged as a success."""
    model = EvictorModel(caps)
    for block_id, content_hash, tokens, time in adds:
        model.step(ops.EvictorAdd(block_id, content_hash, tokens, time), Outcome(), None)
    return model


def _families(found: list[Violation]) -> set[Invariant]:
    return {v.family for v in found}


def _evict(model: EvictorModel, victim: int, content_hash: int) -> list[Violation]:
    rest = {i: m for i, m in model.meta.items() if i != victim}
    return model.step(ops.EvictorEvict(), Outcome(value=[victim, content_hash]), _state(rest))


# --------------------------------------------------------------------------- the victim rule


def test_smallest_time_is_the_only_permitted_victim() -> None:
    adds = [(0, 10, 0, 2.0), (1, 11, 0, 1.0), (2, 12, 4, 3.0)]
    assert _evict(_model(adds), 1, 11) == []
    found = _evict(_model(adds), 0, 10)
    assert _families(found) == {F.LRU} and found[0].expected == [1]


def test_equal_times_go_to_the_most_hashed_tokens() -> None:
    adds = [(0, 10, 1, 1.0), (1, 11, 4, 1.0), (2, 12, 2, 1.0)]
    assert _evict(_model(adds), 1, 11) == []
    assert _families(_evict(_model(adds), 0, 10)) == {F.LRU}


def test_remaining_ties_are_open() -> None:
    """Aphrodite takes the earliest added, vLLM the smallest id: both conform."""
    adds = [(5, 10, 2, 1.0), (3, 11, 2, 1.0), (4, 12, 1, 1.0)]
    assert _evict(_model(adds), 5, 10) == []
    assert _evict(_model(adds), 3, 11) == []


def test_update_moves_a_candidate_both_ways_and_keeps_its_depth() -> None:
    model = _model([(0, 10, 0, 2.0), (1, 11, 0, 3.0)])
    assert model.step(ops.EvictorUpdate(1, 1.0), Outcome(),
                      _state({0: (10, 0, 2.0), 1: (11, 0, 1.0)})) == []
    assert _evict(model, 1, 11) == []
    model = _model([(0, 10, 3, 2.0), (1, 11, 1, 1.0)])
    model.step(ops.EvictorUpdate(1, 2.0), Outcome(), _state({0: (10, 3, 2.0), 1: (11, 1, 2.0)}))
    assert _families(_evict(model, 1, 11)) == {F.LRU}  # tie at 2.0: block 0 is deeper


def test_the_victim_must_come_with_the_hash_it_was_added_with() -> None:
    found = _evict(_model([(0, 10, 0, 1.0)]), 0, 99)
    assert _families(found) == {F.CACHE} and (found[0].expected, found[0].observed) == (10, 99)


def test_a_victim_that_is_no_candidate_is_a_leak() -> None:
    found = _evict(_model([(0, 10, 0, 1.0)]), 7, 10)
    assert F.LEAK in _families(found)


def test_without_an_lru_claim_any_candidate_may_go() -> None:
    adds = [(0, 10, 0, 2.0), (1, 11, 0, 1.0)]
    assert _evict(_model(adds, Capabilities(lru=False)), 0, 10) == []


def test_the_model_follows_the_victim_it_was_shown() -> None:
    model = _model([(0, 10, 2, 1.0), (1, 11, 2, 1.0)])
    assert _evict(model, 1, 11) == []
    assert sorted(model.meta) == [0] and _evict(model, 0, 10) == []


# --------------------------------------------------------------------------- observed state


@pytest.mark.parametrize(("shown", "family"), [
    (_state({0: (10, 1, 1.0)}, count=2), F.LEAK),  # num_blocks
    (_state({0: (10, 1, 1.0), 1: (11, 1, 1.0)}), F.LEAK),  # an id too many
    (_state({}), F.LEAK),  # an id lost
    (_state({0: (99, 1, 1.0)}), F.CACHE),  # content hash
    (_state({0: (10, 2, 1.0)}), F.LRU),  # num_hashed_tokens
    (_state({0: (10, 1, 0.5)}), F.LRU),  # last_accessed
])
def test_the_evictor_must_show_exactly_the_candidates(shown: EvictorState,
                                                      family: Invariant) -> None:
    model = _model([])
    found = model.step(ops.EvictorAdd(0, 10, 1, 1.0), Outcome(), shown)
    assert _families(found) == {family}
    assert model.step(ops.EvictorContains((0,)), Outcome(value=[True]),
                      _state({0: (10, 1, 1.0)})) == []


def test_contains_answers_membership() -> None:
    model = _model([(0, 10, 0, 1.0)])
    shown = _state({0: (10, 0, 1.0)})
    assert model.step(ops.EvictorContains((0, 1)), Outcome(value=[True, False]), shown) == []
    found = model.step(ops.EvictorContains((0, 1)), Outcome(value=[True, True]), shown)
    assert _families(found) == {F.LEAK}


def test_remove_drops_the_candidate() -> None:
    model = _model([(0, 10, 0, 1.0), (1, 11, 0, 2.0)])
    assert model.step(ops.EvictorRemove(0), Outcome(), _state({1: (11, 0, 2.0)})) == []
    assert _families(model.step(ops.EvictorRemove(1), Outcome(),
                                _state({1: (11, 0, 2.0)}))) == {F.LEAK}


# --------------------------------------------------------------------------- misuse


@pytest.mark.parametrize("op", [ops.EvictorUpdate(3, 1.0), ops.EvictorRemove(3),
                                ops.EvictorEvict()])
def test_misuse_must_be_refused_with_a_typed_error(op: Op) -> None:
    assert EvictorModel(TYPED).misuse(op) is not None
    assert EvictorModel(TYPED).step(op, Outcome(error=ErrorKind.MISUSE), _state({})) == []
    found = EvictorModel(TYPED).step(op, Outcome(), _state({}))
    assert _families(found) == {F.LEAK}
    found = EvictorModel(TYPED).step(op, Outcome(error=ErrorKind.UNEXPECTED), _state({}))
    assert _families(found) == {F.CRASH}


def test_add_of_a_bool_id_is_malformed_even_where_it_aliases_a_candidate() -> None:
    for model in (EvictorModel(TYPED), _model([(1, 10, 0, 1.0)])):
        op = ops.EvictorAdd(True, 20, 0, 2.0)
        assert model.misuse(op) is not None and not model.tolerated(op)
    shown = _state({1: (20, 0, 2.0)})
    assert _families(EvictorModel(TYPED).step(ops.EvictorAdd(True, 20, 0, 2.0), Outcome(),
                                              shown)) == {F.LEAK}
    assert EvictorModel(TYPED).misuse(ops.EvictorAdd(1, 20, 0, 2.0)) is None


def test_evict_of_nothing_may_raise_no_free_blocks_but_update_may_not() -> None:
    no_free = Outcome(error=ErrorKind.NO_FREE_BLOCKS)
    assert EvictorModel(TYPED).step(ops.EvictorEvict(), no_free, _state({})) == []
    found = EvictorModel(TYPED).step(ops.EvictorUpdate(3, 1.0), no_free, _state({}))
    assert _families(found) == {F.LEAK}


def test_refused_misuse_must_leave_the_evictor_unchanged() -> None:
    model = _model([(0, 10, 0, 1.0)])
    found = model.step(ops.EvictorRemove(3), Outcome(error=ErrorKind.MISUSE), _state({}))
    assert _families(found) == {F.ATOMIC}
    assert sorted(model.meta) == [0]


def test_misuse_is_out_of_contract_without_typed_errors_or_atomicity() -> None:
    with pytest.raises(OutOfContract):
        EvictorModel(UNTYPED).step(ops.EvictorEvict(), Outcome(error=ErrorKind.UNEXPECTED),
                                   _state({}))
    with pytest.raises(OutOfContract):
        EvictorModel(Capabilities(atomic=False)).step(
            ops.EvictorEvict(), Outcome(error=ErrorKind.MISUSE), _state({}))


def test_add_of_a_candidate_is_refused_unchanged_or_overwrites() -> None:
    shown_old, shown_new = _state({0: (10, 1, 1.0)}), _state({0: (20, 2, 5.0)})
    again = ops.EvictorAdd(0, 20, 2, 5.0)
    refused = _model([(0, 10, 1, 1.0)])
    assert refused.step(again, Outcome(error=ErrorKind.MISUSE), shown_old) == []
    assert refused.meta[0] == (10, 1, 1.0)
    assert _families(_model([(0, 10, 1, 1.0)]).step(
        again, Outcome(error=ErrorKind.MISUSE), shown_new)) == {F.ATOMIC}
    overwritten = _model([(0, 10, 1, 1.0)])
    assert overwritten.step(again, Outcome(), shown_new) == []
    assert overwritten.meta[0] == (20, 2, 5.0) and overwritten.lru.rank(0) == (5.0, -2)
    assert _families(_model([(0, 10, 1, 1.0)]).step(again, Outcome(), shown_old)) \
        == {F.CACHE, F.LRU}  # accepted, yet the old metadata stayed
    with pytest.raises(OutOfContract):
        _model([(0, 10, 1, 1.0)], UNTYPED).step(again, Outcome(), shown_new)


def test_a_valid_call_that_fails_is_flagged() -> None:
    model = _model([(0, 10, 0, 1.0)])
    found = model.step(ops.EvictorEvict(), Outcome(error=ErrorKind.UNEXPECTED),
                       _state({0: (10, 0, 1.0)}))
    assert _families(found) == {F.CRASH}
    found = model.step(ops.EvictorEvict(), Outcome(error=ErrorKind.NO_FREE_BLOCKS),
                       _state({0: (10, 0, 1.0)}))
    assert _families(found) == {F.LEAK}


# --------------------------------------------------------------------------- end to end


def test_bundled_evictor_runs_a_program_with_ties_updates_and_misuse() -> None:
    target = load_target(DEFAULT_SPEC)
    program: list[Op] = [
        ops.EvictorAdd(0, 10, 1, 2.0), ops.EvictorAdd(1, 11, 3, 2.0), ops.EvictorAdd(2, 12, 0, 3.0),
        ops.EvictorUpdate(2, 1.0), ops.EvictorEvict(), ops.EvictorEvict(),
        ops.EvictorRemove(7), ops.EvictorAdd(0, 13, 0, 0.5), ops.EvictorContains((0, 1, 2)),
        ops.EvictorEvict(), ops.EvictorEvict()]
    runner = run_program(target, Config(1, 1, 0, target.caps), program)
    values = [step.outcome.value for step in runner.log]
    assert values[4:6] == [[2, 12], [1, 11]]
    assert runner.log[6].outcome.error is ErrorKind.MISUSE
    assert runner.log[7].outcome.error is ErrorKind.MISUSE  # the bundled evictor refuses
    assert values[8] == [True, False, False] and values[9] == [0, 10]
    assert runner.log[10].outcome.error is ErrorKind.NO_FREE_BLOCKS


def test_the_adapter_finds_the_evictor_factory() -> None:
    target = load_target(DEFAULT_SPEC)
    adapter = target.adapter(Config(1, 1, 0, target.caps))
    assert adapter.evictor_factory() == ("prefixcache.evictor", "make_evictor")
    zoo = load_target("tests.zoo.v0.broken:evictor_remove_keeps_count")
    adapter = zoo.adapter(Config(1, 1, 0, zoo.caps))
    assert adapter.evictor_factory() == ("prefixcache_zoo.evictor_remove_keeps_count.evictor",
                                         "make_evictor")  # the patched copy's
    naive = load_target(DEFAULT_SPEC, allocator_type="naive")
    assert not naive.adapter(Config(1, 1, 0, naive.caps)).has_evictor


@pytest.mark.parametrize("op", [ops.EvictorAdd(2**40, 2**63 - 1, 4, 7.5),
                                ops.EvictorUpdate(0, 0.0), ops.EvictorRemove(3),
                                ops.EvictorEvict(), ops.EvictorContains((0, 2**40))])
def test_evictor_ops_round_trip_through_json(op: Op) -> None:
    assert ops.op_from_json(ops.op_to_json(op)) == op
    assert ops.OPS_BY_KIND[op.kind] is type(op)
