"""The construction contract (``Construct``, ``models.families.v0.ops.construction``): valid
constructions over explicit ids read back as the model says (each read-out, when wrong, flagged with
its family), malformed constructor arguments refused with a typed error by the bundled allocator and
left out of contract for targets without typed errors, the classes found per target (vLLM 0.8 has
them all but the hash-function extension), and the JSON round trip."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from models.core.invariants import Invariant, Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.contract import OutOfContract
from models.families.v0.invariants import Family
from models.families.v0.operations import ErrorKind, Op
from models.families.v0.ops import construction
from models.families.v0.oracle import Oracle
from properties.core.targets import DEFAULT_SPEC, load_target
from properties.families.v0.adapter import Unsupported
from properties.families.v0.runner import Runner
from tests.model.judged import run_judged

F = Family
VLLM = "properties.upstream:vllm_v0_allocator"
TOP = 2**64 - 1


def _run(program: Sequence[Op], *, spec: str = DEFAULT_SPEC,
         tamper: object = None) -> list[tuple[ErrorKind | None, object]]:
    """Run ``program`` on ``spec`` (block size 2, 4 GPU + 2 CPU blocks) under the oracle; with
    ``tamper``, the last step's value is replaced before it is judged."""
    return run_judged(program, spec, (2, 4, 2), tamper=tamper)[0]


# --------------------------------------------------------------------------- valid


@pytest.mark.parametrize("spec", [DEFAULT_SPEC, VLLM])
@pytest.mark.parametrize("allocator", ops.CONSTRUCT_ALLOCATORS)
def test_explicit_ids_read_back_in_the_given_order(spec: str, allocator: str) -> None:
    """Gaps and a permuted order: physical ids are ranks, allocation keeps the given order."""
    values = _run([ops.Construct(allocator, (9, 2, TOP, 5))], spec=spec)
    assert values == [(None, {"total": [4], "free": [4], "all": [2, 5, 9, TOP],
                              "physical": [2, 0, 3, 1], "handed": [9, 2, TOP, 5],
                              "free_after": [0]})]


def test_mutable_allocations_may_hand_out_the_ids_in_any_order() -> None:
    """Any free id may be handed out: the reverse of the order given conforms, an id of the
    other device or a repeated one does not (LEAK)."""
    construct = ops.Construct("prefix_caching", (7, 3), True, (1, 0, 40))
    reads = {"total": [2, 3], "free": [2, 3], "all": [0, 1, 3, 7, 40],
             "physical": [1, 0, 1, 0, 2], "free_after": [0, 0]}
    assert _run([construct], tamper={**reads, "handed": [3, 7, 40, 0, 1]})
    for handed in ([3, 1, 40, 0, 7], [3, 3, 40, 0, 1]):
        with pytest.raises(Violation) as found:
            _run([construct], tamper={**reads, "handed": handed})
        assert found.value.family is F.LEAK


@pytest.mark.parametrize("spec", [DEFAULT_SPEC, VLLM])
def test_two_devices_over_explicit_ids(spec: str) -> None:
    """Each device ranks its own ids; ``all_block_ids`` is the union; an empty CPU is fine."""
    values = _run([ops.Construct("prefix_caching", (7, 3), True, (1, 0, 40)),
                   ops.Construct("naive", (4,), True, ())], spec=spec)
    assert values[0] == (None, {"total": [2, 3], "free": [2, 3], "all": [0, 1, 3, 7, 40],
                                "physical": [1, 0, 1, 0, 2], "handed": [7, 3, 1, 0, 40],
                                "free_after": [0, 0]})
    assert values[1][1] == {"total": [1, 0], "free": [1, 0], "all": [4], "physical": [0],
                            "handed": [4], "free_after": [0, 0]}


GOOD = {"total": [3], "free": [3], "all": [1, 4, 6], "physical": [2, 0, 1],
        "handed": [6, 1, 4], "free_after": [0]}


@pytest.mark.parametrize(("key", "wrong", "family"), [
    ("total", [2], F.FREE),
    ("free", [0], F.FREE),
    ("all", [0, 1, 2], F.LEAK),
    ("physical", [6, 1, 4], F.SWAP),
    ("handed", [6, 6, 4], F.LEAK),  # an id handed out twice (any order is fine)
    ("free_after", [1], F.FREE),
])
def test_each_wrong_read_out_is_flagged(key: str, wrong: list[int], family: Invariant) -> None:
    op = ops.Construct("naive", (6, 1, 4))
    assert _run([op]) == [(None, GOOD)]
    with pytest.raises(Violation) as err:
        _run([op], tamper={**GOOD, key: wrong})
    assert err.value.family is family


def test_missing_read_outs_are_flagged() -> None:
    with pytest.raises(Violation) as err:
        _run([ops.Construct("naive", (6, 1, 4))], tamper={"total": [3]})
    assert err.value.family is F.FREE


# --------------------------------------------------------------------------- malformed


def _every_malformed() -> list[ops.Construct]:
    """Every generated malformed value of every argument, on each shape it applies to."""
    shapes = [ops.Construct(a, (3, 1), d, (6, 0) if d else ())
              for a in ops.CONSTRUCT_ALLOCATORS for d in (False, True)]
    out = []
    for shape in shapes:
        for argument in construction.ARGUMENTS:
            for bad in construction.bad_values(shape, argument):
                op = replace(shape, argument=argument, bad=bad)
                try:
                    if construction.construct_misuse(op) is not None:
                        out.append(op)
                except construction.ConstructOut:
                    pass
    return out


def test_generated_values_are_misuse_wherever_they_apply() -> None:
    ops_ = _every_malformed()
    assert {op.argument for op in ops_} == set(construction.ARGUMENTS)
    assert len(ops_) > 100


def test_bundled_allocator_refuses_every_malformed_argument() -> None:
    for op in _every_malformed():
        assert _run([op])[0][0] is ErrorKind.MISUSE, op


@pytest.mark.parametrize(("argument", "bad", "why"), [
    ("block_ids", (3, 3), "duplicates"),
    ("block_ids", (3, -1), "negative"),
    ("block_ids", (3, 2**64), "too large"),
    ("block_ids", (3,), "too few"),
    ("block_ids", (3, 1, 2), "too many"),
    ("block_ids", (3, True), "a bool"),
    ("block_ids", "ab", "not a list"),
    ("num_blocks", 3, "not the number of ids"),
    ("block_size", 0, "not positive"),
    ("allocator_type", "x", "unknown type"),
])
def test_malformed_arguments_are_misuse(argument: str, bad: object, why: str) -> None:
    op = ops.Construct("naive", (3, 1), argument=argument, bad=bad)
    assert construction.construct_misuse(op) is not None, why


@pytest.mark.parametrize("op", [
    ops.Construct("naive", (3, 1), argument="block_ids", bad=(1, 3)),  # well-formed
    ops.Construct("naive", (3, 1), argument="block_ids", bad=None),  # the default
    ops.Construct("naive", (3, 1), argument="num_blocks", bad=2),
    ops.Construct("naive", (3, 1), argument="eviction_policy", bad="LRU"),  # no such argument
    ops.Construct("naive", (3, 1), argument="cpu_block_ids", bad=(3,)),  # one device only
    ops.Construct("naive", (3, 1), True, (3,)),  # the base construction overlaps
    ops.Construct("naive", (3, 3)),  # the base construction has duplicates
    ops.Construct("naive", (1,), cpu_ids=(2,)),  # CPU ids without devices
    ops.Construct("lru", (1,)),
    ops.Construct("naive", (3, 1), True, (0,), argument="cpu_block_allocator", bad=None),
    ops.Construct("naive", (3, 1), argument="allocator_type", bad="naive"),
    ops.Construct("prefix_caching", (3, 1), argument="hash_function", bad=None),
])
def test_out_of_contract(op: ops.Construct) -> None:
    with pytest.raises(construction.ConstructOut):
        construction.construct_misuse(op)


def test_accepted_misuse_and_untyped_errors_are_flagged() -> None:
    """A malformed construction that succeeds is ATOMIC (bad input must be refused); one
    that raises an untyped error is CRASH."""
    op = ops.Construct("naive", (3, 1), argument="block_ids", bad=(3, 3))
    target = load_target(DEFAULT_SPEC)
    config = Config(2, 4, 2, target.caps)
    for outcome, family in ((ops.Outcome(), F.ATOMIC),
                            (ops.Outcome(error=ErrorKind.UNEXPECTED, detail="TypeError"),
                             F.CRASH)):
        runner, oracle = Runner(target, config), Oracle(config)
        oracle.initial_check(runner.snapshot())
        with pytest.raises(Violation) as err:
            oracle.step(op, outcome, runner.snapshot())
        assert err.value.family is family


def test_misuse_is_out_of_contract_without_typed_errors() -> None:
    op = ops.Construct("naive", (3, 1), argument="block_ids", bad=(3, 3))
    with pytest.raises(OutOfContract):
        _run([op], spec=VLLM)


# --------------------------------------------------------------------------- plumbing


def test_classes_found_per_target() -> None:
    """The bundled allocator has every class and takes a hash function; vLLM 0.8 has the
    classes but no hash-function argument, so that malformed argument has no plan."""
    for spec, support in ((DEFAULT_SPEC, {"naive", "prefix_caching", "devices",
                                          "hash_function"}),
                          (VLLM, {"naive", "prefix_caching", "devices"})):
        target = load_target(spec)
        adapter = Runner(target, Config(2, 2, 2, target.caps)).adapter
        assert adapter.construct_support() == support
    with pytest.raises(Unsupported):
        adapter.plan(ops.Construct("prefix_caching", (1,), argument="hash_function", bad=5), {})
    naive = load_target(allocator_type="naive")
    adapter = Runner(naive, Config(2, 2, 2, naive.caps)).adapter
    assert adapter.construct_support() == {"naive", "prefix_caching", "devices", "hash_function"}


@pytest.mark.parametrize("op", [
    ops.Construct("naive", (9, 2, TOP), True, (4,)),
    ops.Construct("prefix_caching", (1, 2), argument="block_ids", bad=(1, "x")),
    ops.Construct("naive", (1,), True, (), argument="cpu_block_allocator",
                  bad="gpu_block_allocator"),
])
def test_json_round_trip(op: ops.Construct) -> None:
    assert ops.op_from_json(ops.op_to_json(op)) == op
