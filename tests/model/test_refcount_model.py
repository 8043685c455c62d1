"""The refcount-level semantics (``models.families.v0.refcount_model``): each rule judged directly
on hand-made outcomes and counter states (so a wrong model rule fails here), then end to end on the
bundled allocator's classes and vLLM 0.8's, the capability detection, and JSON round
trips."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from models.core.invariants import Invariant, Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Capabilities, Config
from models.families.v0.contract import OutOfContract
from models.families.v0.invariants import Family
from models.families.v0.operations import ErrorKind, Op, Outcome, RefcountState
from models.families.v0.refcount_model import RefcountModel
from properties.core.replay import run_program
from properties.core.targets import DEFAULT_SPEC, load_target

F = Family
TYPED = Capabilities()
UNTYPED = Capabilities(atomic=False, typed_errors=False)


def _model(ids: Sequence[int] = (0, 1, 2), incrs: Sequence[int] = (),
           caps: Capabilities = TYPED) -> RefcountModel:
    """A counter over ``ids`` after one successful ``incr`` per entry of ``incrs``."""
    model = RefcountModel(caps)
    model.step(ops.RefNew(tuple(ids)), Outcome(), None)
    for block_id in incrs:
        assert model.counts is not None
        model.step(ops.RefIncr(block_id), Outcome(value=model.counts[block_id] + 1), None)
    return model


def _state(counts: Mapping[int, int], pending: Sequence[tuple[int, int]] | None = None
           ) -> RefcountState:
    return RefcountState(dict(counts), None if pending is None else tuple(pending))


def _families(found: list[Violation]) -> set[Invariant]:
    return {v.family for v in found}


# --------------------------------------------------------------------------- counting


def test_duplicate_ids_merge_and_start_at_zero() -> None:
    model = _model((3, 3, 2**40, 0))
    assert model.counts == {3: 0, 2**40: 0, 0: 0} and model.ids() == [0, 3, 2**40]


def test_incr_and_decr_return_the_new_count() -> None:
    model = _model()
    assert model.step(ops.RefIncr(1), Outcome(value=1), _state({0: 0, 1: 1, 2: 0})) == []
    assert model.step(ops.RefIncr(1), Outcome(value=2), _state({0: 0, 1: 2, 2: 0})) == []
    assert model.step(ops.RefDecr(1), Outcome(value=1), _state({0: 0, 1: 1, 2: 0})) == []
    found = _model(incrs=(1,)).step(ops.RefDecr(1), Outcome(value=1), _state({0: 0, 1: 0, 2: 0}))
    assert _families(found) == {F.RC} and (found[0].expected, found[0].observed) == (0, 1)
    found = _model().step(ops.RefIncr(2), Outcome(value=0), _state({0: 0, 1: 0, 2: 1}))
    assert _families(found) == {F.RC}


def test_get_answers_the_count_directly_and_through_the_view() -> None:
    model = _model(incrs=(2, 2))
    for readonly in (False, True):
        assert model.step(ops.RefGet(2, readonly), Outcome(value=2), None) == []
        assert _families(model.step(ops.RefGet(2, readonly), Outcome(value=0), None)) == {F.RC}


def test_the_shown_counts_must_equal_the_model() -> None:
    model = _model(incrs=(0,))
    assert model.step(ops.RefGet(1), Outcome(value=0), _state({0: 1, 1: 0, 2: 0})) == []
    found = model.step(ops.RefGet(1), Outcome(value=0), _state({0: 1, 1: 0, 2: 5}))
    assert _families(found) == {F.RC} and found[0].expected == {2: 0}
    found = model.step(ops.RefGet(1), Outcome(value=0), _state({0: 1, 1: 0}))
    assert _families(found) == {F.RC}  # an id the counter no longer shows


def test_a_fresh_counter_forgets_counts_and_pairs() -> None:
    model = _model(incrs=(0, 0))
    model.step(ops.CowRecord(0, 5), Outcome(), None)
    assert model.step(ops.RefNew((0, 4)), Outcome(), _state({0: 0, 4: 0}, [])) == []
    assert model.counts == {0: 0, 4: 0} and model.cows == []
    assert _families(model.step(ops.RefNew((0,)), Outcome(), _state({0: 2}))) == {F.RC}


# --------------------------------------------------------------------------- copy-on-write


@pytest.mark.parametrize(("incrs", "block_id", "want"), [
    ((), None, True), ((), 1, True), ((1,), 1, True), ((1, 1), 1, False),
    ((1, 1, 1), 1, False), ((1, 1), None, True)])
def test_appendable_iff_no_id_or_refcount_at_most_one(incrs: tuple[int, ...],
                                                      block_id: int | None, want: bool) -> None:
    model = _model(incrs=incrs)
    assert model.step(ops.CowAppendable(block_id), Outcome(value=want), None) == []
    model = _model(incrs=incrs)
    found = model.step(ops.CowAppendable(block_id), Outcome(value=not want), None)
    assert _families(found) == {F.COW}


def test_clear_returns_the_pairs_in_order_and_resets() -> None:
    model = _model()
    for src, dst in ((0, 7), (2**40, 0), (0, 7)):
        assert model.step(ops.CowRecord(src, dst), Outcome(), None) == []
    want = [[0, 7], [2**40, 0], [0, 7]]
    assert model.step(ops.CowClear(), Outcome(value=want), _state({0: 0, 1: 0, 2: 0}, [])) == []
    assert model.step(ops.CowClear(), Outcome(value=[]), None) == []
    model = _model()
    model.step(ops.CowRecord(0, 1), Outcome(), None)
    model.step(ops.CowRecord(1, 2), Outcome(), None)
    assert _families(model.step(ops.CowClear(), Outcome(value=[[1, 2], [0, 1]]), None)) == {F.COW}


def test_pending_pairs_where_shown_must_equal_the_model() -> None:
    model = _model()
    assert model.step(ops.CowRecord(1, 2), Outcome(), _state({0: 0, 1: 0, 2: 0}, [(1, 2)])) == []
    found = model.step(ops.CowClear(), Outcome(value=[[1, 2]]), _state({0: 0, 1: 0, 2: 0},
                                                                      [(1, 2)]))
    assert _families(found) == {F.COW}  # returned, but kept


# --------------------------------------------------------------------------- misuse


MISUSE: list[tuple[tuple[int, ...], Op, Family]] = [
    ((), ops.RefIncr(0, readonly=True), F.RC),
    ((0,), ops.RefDecr(0, readonly=True), F.RC),
    ((), ops.RefIncr(9), F.RC),
    ((), ops.RefGet(9, readonly=True), F.RC),
    ((), ops.RefDecr(0), F.RC),
    ((1,), ops.RefGet(True), F.RC),
    ((), ops.RefIncr(False), F.RC),
    ((), ops.CowAppendable(9), F.COW),
    ((), ops.CowRecord(None, 1), F.COW),
    ((), ops.CowRecord(1, None), F.COW),
]


@pytest.mark.parametrize(("incrs", "op", "family"), MISUSE)
def test_misuse_must_be_refused_with_a_typed_error(incrs: tuple[int, ...], op: Op,
                                                   family: Invariant) -> None:
    model = _model(incrs=incrs)
    assert model.misuse(op) is not None
    counts = dict(model.counts or {})
    assert model.step(op, Outcome(error=ErrorKind.MISUSE), _state(counts)) == []
    assert model.counts == counts
    assert _families(_model(incrs=incrs).step(op, Outcome(value=1), None)) == {family}
    assert _families(_model(incrs=incrs).step(op, Outcome(error=ErrorKind.ASSERTION),
                                              None)) == {F.CRASH}


def test_refused_misuse_must_leave_counts_and_pairs_unchanged() -> None:
    model = _model(incrs=(0,))
    found = model.step(ops.RefIncr(0, readonly=True), Outcome(error=ErrorKind.MISUSE),
                       _state({0: 2, 1: 0, 2: 0}))
    assert _families(found) == {F.ATOMIC}
    model = _model()
    found = model.step(ops.CowRecord(None, 3), Outcome(error=ErrorKind.MISUSE),
                       _state({0: 0, 1: 0, 2: 0}, [(None, 3)]))  # type: ignore[list-item]
    assert _families(found) == {F.ATOMIC}


def test_valid_calls_are_not_misuse() -> None:
    model = _model(incrs=(1,))
    for op in (ops.RefDecr(1), ops.RefGet(2, readonly=True), ops.CowAppendable(None),
               ops.CowRecord(2**40, 99), ops.CowClear(), ops.RefNew(())):
        assert model.misuse(op) is None, op


def test_misuse_is_out_of_contract_without_typed_errors_or_atomicity() -> None:
    with pytest.raises(OutOfContract):
        _model(caps=UNTYPED).step(ops.RefDecr(0), Outcome(error=ErrorKind.ASSERTION), None)
    with pytest.raises(OutOfContract):
        _model(caps=Capabilities(atomic=False)).step(
            ops.RefDecr(0), Outcome(error=ErrorKind.MISUSE), None)


def test_nothing_before_the_first_counter() -> None:
    model = RefcountModel(TYPED)
    assert not model.built and model.ids() == []
    with pytest.raises(OutOfContract):
        model.misuse(ops.CowClear())
    assert model.misuse(ops.RefNew((1,))) is None


def test_a_valid_call_that_fails_is_flagged() -> None:
    found = _model(incrs=(0,)).step(ops.RefDecr(0), Outcome(error=ErrorKind.MISUSE), None)
    assert _families(found) == {F.RC}
    found = _model().step(ops.CowClear(), Outcome(error=ErrorKind.UNEXPECTED), None)
    assert _families(found) == {F.CRASH}
    found = _model().step(ops.CowRecord(0, 1), Outcome(error=ErrorKind.MISUSE), None)
    assert _families(found) == {F.COW}


# --------------------------------------------------------------------------- end to end


PROGRAM: list[Op] = [
    ops.RefNew((4, 1, 4, 2**40)), ops.RefIncr(4), ops.RefIncr(4), ops.CowAppendable(4),
    ops.RefDecr(4), ops.CowAppendable(4), ops.RefGet(4, readonly=True), ops.CowRecord(4, 1),
    ops.CowRecord(2**40, 7), ops.CowAppendable(None), ops.CowClear(), ops.RefDecr(4),
    ops.RefGet(2**40)]


def test_bundled_classes_run_a_program_with_misuse() -> None:
    target = load_target(DEFAULT_SPEC)
    misuse: list[Op] = [ops.RefDecr(4), ops.RefIncr(1, readonly=True), ops.RefGet(3),
                        ops.RefGet(True), ops.CowAppendable(0), ops.CowRecord(None, 1),
                        ops.CowClear()]
    runner = run_program(target, Config(1, 1, 0, target.caps), PROGRAM + misuse)
    values = [step.outcome.value for step in runner.log]
    assert values[1:7] == [1, 2, False, 1, True, 1]
    assert values[10] == [[4, 1], [2**40, 7]] and values[11:13] == [0, 0]
    errors = [step.outcome.error for step in runner.log[len(PROGRAM):-1]]
    assert errors == [ErrorKind.MISUSE] * (len(misuse) - 1)
    assert values[-1] == []  # the refused record left nothing behind


def test_vllm_classes_follow_the_model() -> None:
    """vLLM 0.8's RefCounter and CopyOnWriteTracker (valid calls only: no typed errors)."""
    target = load_target("properties.upstream:vllm_v0_allocator")
    assert not target.caps.typed_errors
    runner = run_program(target, Config(1, 1, 0, target.caps), PROGRAM)
    assert [step.outcome.value for step in runner.log][10] == [[4, 1], [2**40, 7]]


def test_the_adapter_finds_the_counter_and_tracker_classes() -> None:
    target = load_target(DEFAULT_SPEC)
    adapter = target.adapter(Config(1, 1, 0, target.caps))
    assert adapter.refcount_classes() == (("prefixcache.common", "RefCounter"),
                                          ("prefixcache.common", "CopyOnWriteTracker"))
    naive = load_target(DEFAULT_SPEC, allocator_type="naive")
    assert naive.adapter(Config(1, 1, 0, naive.caps)).has_refcount
    zoo = load_target("tests.zoo.v0.broken:cow_clear_keeps_pairs")
    assert zoo.adapter(Config(1, 1, 0, zoo.caps)).refcount_classes() == (
        ("prefixcache_zoo.cow_clear_keeps_pairs.common", "RefCounter"),  # the patched copy's
        ("prefixcache_zoo.cow_clear_keeps_pairs.common", "CopyOnWriteTracker"))
    vllm = load_target("properties.upstream:vllm_v0_allocator")
    assert vllm.adapter(Config(1, 1, 0, vllm.caps)).refcount_classes() == (
        ("vllm.core.block.common", "RefCounter"),
        ("vllm.core.block.common", "CopyOnWriteTracker"))


def test_a_target_without_the_classes_has_no_refcount_level() -> None:
    target = load_target(DEFAULT_SPEC)
    adapter = target.adapter(Config(1, 1, 0, target.caps))
    del adapter.alloc._allocators[adapter.device_enum.GPU]._cow_tracker
    assert adapter.refcount_classes() is None


@pytest.mark.parametrize("op", [ops.RefNew((0, 0, 2**40)), ops.RefIncr(3, readonly=True),
                                ops.RefDecr(0), ops.RefGet(True), ops.CowAppendable(None),
                                ops.CowAppendable(5), ops.CowRecord(None, 2**40),
                                ops.CowClear()])
def test_refcount_ops_round_trip_through_json(op: Op) -> None:
    back = ops.op_from_json(ops.op_to_json(op))
    assert back == op and type(getattr(back, "block_id", 0)) is type(getattr(op, "block_id", 0))
    assert ops.OPS_BY_KIND[op.kind] is type(op)
