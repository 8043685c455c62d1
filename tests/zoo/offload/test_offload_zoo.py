"""The offload zoo: every mutant of :data:`tests.zoo.offload.mutants.MUTANTS` is caught by the
offload machine with its invariant under the fixed budget, with a short shrunk program; the
bundled manager passes the same budget under both policies. The eviction-order mutants also
fail hand-written programs, each the shortest interleaving that tells its policy apart, so the
model's order rule is pinned independently of what the machine happens to draw."""

from __future__ import annotations

import pytest

from models.families.offload.invariants import OffloadInvariants as F
from properties.core.replay import check
from properties.core.targets import load_target
from properties.families.offload.family import REF
from tests.zoo.offload.catching import catch, run
from tests.zoo.offload.mutants import BY_NAME, MUTANTS


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_the_bundled_manager_passes_the_budget(policy: str) -> None:
    run(load_target(family=REF, allocator_type=policy))


@pytest.mark.parametrize("name", [m.name for m in MUTANTS])
def test_each_mutant_is_caught_with_its_invariant(name: str) -> None:
    caught = catch(name)
    assert caught.violation.family in BY_NAME[name].families, caught.violation
    # An order bug needs its keys stored, reused and evicted: the written programs below are
    # 8 to 13 operations long.
    assert 0 < caught.steps <= (20 if BY_NAME[name].family is F.ORDER else 10), caught.steps


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
def test_order_mutants_fail_a_written_program(name: str) -> None:
    geometry, program = PROGRAMS[name]
    spec = f"tests.zoo.offload.mutants:{name}"
    policy = BY_NAME[name].policy
    check("", geometry, program, family=REF, allocator_type=policy)  # the bundled passes
    with pytest.raises(Exception, match=r"\[ORDER\]"):
        check(spec, geometry, program, family=REF, allocator_type=policy)


def test_the_zoo_covers_each_policy_and_its_written_programs() -> None:
    assert set(PROGRAMS) <= {m.name for m in MUTANTS}
    assert len(MUTANTS) >= 20
    assert {m.policy for m in MUTANTS} == {"lru", "arc"}
