"""vLLM 0.33.0's own ``KVCacheManager`` runs on the bundled ``prefixcache.v1`` BlockPool.

The request machine (with the shadow KV memory) drives the release's manager, coordinators
and single-type managers unchanged; only the class the coordinator builds its pool from is the
bundled one (:func:`~properties.families.v1.request.target.vllm_v1_manager_on_bundled_pool`).
The only deviations allowed are the manager's own: the entries of the release's manager xfails
file (the core's matching), each of which must still reproduce here (so it is the manager's,
not the pool's). Skipped (by this directory's conftest) without torch or the wheel. The request
machine runs on it through the core, in CI at the ci profile's budget: ``prefixcache check
--allocator properties.upstream:vllm_v1_manager_on_bundled_pool --xfails-file
conformance/vllm-0.33.manager.xfails.json``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from models.core.invariants import Violation
from models.families.v1.request_invariants import ManagerInvariants
from prefixcache.v1.core.block_pool import BlockPool
from properties.core.plugin import ExpectedFailure, load_raw, parse_expected
from properties.core.replay import run_program
from properties.core.targets import Target, load_target
from properties.families.v1.request.family import manager_of
from properties.families.v1.request.target import FULL

XFAILS = Path(__file__).resolve().parents[3] / "conformance" / "vllm-0.33.manager.xfails.json"
SPEC = "properties.upstream:vllm_v1_manager_on_bundled_pool"


@pytest.fixture(scope="module")
def target() -> Target:
    return load_target(SPEC)


@pytest.fixture(scope="module")
def entries() -> list[ExpectedFailure]:
    return parse_expected(load_raw(str(XFAILS)), ManagerInvariants)


def test_the_manager_builds_the_bundled_pool(target: Target) -> None:
    manager = manager_of(target)
    assert isinstance(manager.create(FULL).block_pool, BlockPool)
    # The shared release modules keep their own class for the release's target.
    assert manager.mods.kv_cache_coordinator.BlockPool is not manager.pool_cls


def test_manager_xfails_are_the_managers(target: Target,
                                         entries: list[ExpectedFailure]) -> None:
    """Each manager deviation of the release reproduces with the bundled pool underneath; an
    entry that ``requires`` the release's own pool (a deviation of vLLM's ``BlockPool`` the
    manager passes on, its per-copy event removals) does not apply here, and its program runs
    clean on the bundled pool."""
    own = [e for e in entries if e.applies(target.xfails_release, target.judges)]
    assert own
    vocabulary = target.family_object.vocabulary
    for entry in entries:
        program = [vocabulary.op_from_json(r) for r in entry.program]
        config = vocabulary.config(target, entry.config)
        if entry not in own:
            assert "release-pool" in entry.requires, entry.id
            run_program(target, config, program)
            continue
        with pytest.raises(Violation) as info:
            run_program(target, config, program)
        history = program[: (info.value.step or 0) + 1]
        assert entry.matches(info.value, history), (entry.id, str(info.value))
