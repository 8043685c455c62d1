"""The offload zoo: every mutant of :data:`tests.zoo.offload.mutants.MUTANTS` is caught by the
offload machine with its invariant under the fixed budget, with a short shrunk program; the
bundled manager passes the same budget under both policies. The mutants the budget does not
yet meet (:data:`~tests.zoo.offload.mutants.ESCAPING`) fail hand-written programs (all but
one), so they stay real bugs the model judges."""

from __future__ import annotations

import pytest

from properties.core.replay import check
from properties.core.targets import load_target
from properties.families.offload.family import REF
from tests.zoo.offload.catching import catch, run
from tests.zoo.offload.mutants import BY_NAME, ESCAPING, MUTANTS


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_the_bundled_manager_passes_the_budget(policy: str) -> None:
    run(load_target(family=REF, allocator_type=policy))


@pytest.mark.parametrize("name", [m.name for m in MUTANTS])
def test_each_mutant_is_caught_with_its_invariant(name: str) -> None:
    caught = catch(name)
    assert caught.violation.family in BY_NAME[name].families, caught.violation
    assert 0 < caught.steps <= 10, caught.steps


def _store(req: int, *keys: int) -> list[dict[str, object]]:
    return [{"op": "prepare_store", "req": req, "keys": list(keys)},
            {"op": "complete_store", "req": req, "keys": list(keys)}]


#: mutant -> (tier shape, a program it fails).
PROGRAMS: dict[str, tuple[dict[str, object], list[dict[str, object]]]] = {
    # r0 finishes after r1 started: committing makes r0's key the most recent.
    "finish_commits_nothing": ({"num_chunks": 2}, [
        *_store(0, 0), *_store(1, 1), {"op": "finish", "req": 0}, *_store(2, 2)]),
    # r1 reuses key 0: promoted to T2, so T1's key 1 is the victim.
    "arc_never_promotes": ({"num_chunks": 2}, [
        *_store(0, 0), {"op": "finish", "req": 0}, *_store(1, 1),
        {"op": "prepare_load", "req": 2, "keys": [0]},
        {"op": "complete_load", "req": 2, "keys": [0]}, {"op": "finish", "req": 2},
        {"op": "finish", "req": 1}, *_store(3, 2)]),
    "arc_reuse_not_recorded": ({"num_chunks": 2}, [
        *_store(0, 0), {"op": "finish", "req": 0}, *_store(1, 1),
        {"op": "prepare_load", "req": 2, "keys": [0]},
        {"op": "complete_load", "req": 2, "keys": [0]}, {"op": "finish", "req": 2},
        {"op": "finish", "req": 1}, *_store(3, 2)]),
    # A, evicted from T1, is offered again: the B1 ghost hit raises T1's target to 1, so T1
    # (holding C alone) is still at its target and gives the victim, not T2's B.
    "arc_t1_target_ignored": ({"num_chunks": 2}, [
        *_store(0, 0), *_store(1, 1), *_store(2, 2),
        {"op": "prepare_load", "req": 3, "keys": [1]},
        {"op": "complete_load", "req": 3, "keys": [1]}, {"op": "finish", "req": 3},
        *_store(4, 0)]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_escaping_mutants_fail_a_written_program(name: str) -> None:
    geometry, program = PROGRAMS[name]
    spec = f"tests.zoo.offload.mutants:{name}"
    policy = BY_NAME[name].policy
    check("", geometry, program, family=REF, allocator_type=policy)  # the bundled passes
    with pytest.raises(Exception, match=r"\[ORDER\]"):
        check(spec, geometry, program, family=REF, allocator_type=policy)


def test_every_escaping_mutant_is_accounted_for() -> None:
    assert {m.name for m in ESCAPING} >= set(PROGRAMS)
    assert len(MUTANTS) >= 20
