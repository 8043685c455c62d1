"""Third-party conformance of Aphrodite 0.6.5's real block allocator (``conformance/``):
every entry of ``conformance/aphrodite-0.6.5.xfails.json`` still reproduces against the
aphrodite-engine wheel, no other entry covers it, it passes against the bundled allocator,
and its script prints the violation (``tests.thirdparty.xfails_conformance``). Also pinned
here: the capabilities detected on Aphrodite (no extra keys, no tracker caching switch), and
the suite's direct hash-quality check reporting Aphrodite's Python ``hash()`` key as HASH."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.invariants import Family
from models.families.v0.oracle import Oracle, OutOfContract
from properties.core.plugin import ExpectedFailure
from properties.core.targets import Target, load_target
from properties.families.v0 import hash_quality
from properties.families.v0.runner import Runner
from properties.families.v0.upstream import APHRODITE_FETCH_COMMAND, load_aphrodite
from tests.thirdparty import xfails_conformance as xc

FILE = xc.XfailsFile("aphrodite-0.6.5", "properties.upstream:aphrodite_allocator",
                     load_aphrodite, APHRODITE_FETCH_COMMAND)


@pytest.fixture(scope="module")
def aphrodite() -> Iterator[Target]:
    yield from FILE.target()


@pytest.fixture(scope="module")
def bundled() -> Target:
    return load_target(xc.BUNDLED)


def test_entries_are_well_formed() -> None:
    xc.check_well_formed(FILE)


@pytest.mark.parametrize("entry", FILE.entries, ids=FILE.ids)
def test_entry_reproduces_against_aphrodite(aphrodite: Target, entry: ExpectedFailure) -> None:
    xc.check_reproduces(FILE, aphrodite, entry)


@pytest.mark.parametrize("entry", FILE.entries, ids=FILE.ids)
def test_no_other_entry_covers_the_program(aphrodite: Target, entry: ExpectedFailure) -> None:
    xc.check_only_entry(FILE, aphrodite, entry)


@pytest.mark.parametrize("entry", FILE.entries, ids=FILE.ids)
def test_entry_passes_against_bundled(bundled: Target, entry: ExpectedFailure) -> None:
    xc.run(bundled, entry, FILE.entries)


@pytest.mark.parametrize("entry", FILE.entries, ids=FILE.ids)
def test_reproducer_script_prints_the_violation(aphrodite: Target,
                                                entry: ExpectedFailure) -> None:
    xc.check_script(FILE, entry)


def test_loaded_from_the_wheel_with_two_engine_stubs(aphrodite: Target) -> None:
    """Only the wheel's block modules run; the engine names they import are the stubs for
    ``Device``/``cdiv``/``chunk_list`` and the sequence protocols, nothing else."""
    mods = load_aphrodite()
    assert mods.origin.endswith(".whl/aphrodite"), mods.origin
    assert mods.stubbed == ("aphrodite.common.sequence", "aphrodite.common.utils")
    assert mods.evictor.__name__ == "aphrodite.processing.evictor_v2"
    assert type(aphrodite.factory("prefix_caching", 2, 2, 2)).__module__ == (
        "aphrodite.processing.block.cpu_gpu_block_allocator")


def test_detected_capabilities(aphrodite: Target) -> None:
    caps = aphrodite.caps
    assert caps.aphrodite_api and not caps.vllm_api and not caps.extra_keys
    assert not caps.tracker_caching_switch and not caps.atomic and not caps.typed_errors
    assert aphrodite.version == "aphrodite-engine 0.6.5"


def test_hash_quality_reports_the_python_hash_key(aphrodite: Target) -> None:
    """Aphrodite keys blocks by ``hash((is_first, prev, *tokens))``: the near-miss pair -1/-2
    collides, the finding is HASH, and hash-collision-trusted covers it."""
    with pytest.raises(Violation) as info:
        hash_quality.check(aphrodite)
    violation = info.value
    assert violation.family is Family.HASH, str(violation)
    history = violation.prefixcache_history  # type: ignore[attr-defined]
    assert {-1, -2} <= {t for op in history for t in op.tokens}
    assert [e.id for e in FILE.entries if e.matches(violation, history)] == [
        "hash-collision-trusted"]


def test_removing_an_unknown_sequence_is_not_a_false_alarm(aphrodite: Target) -> None:
    """Aphrodite's naive engine: its computed tracker asserts on ``remove_seq`` of a sequence
    it never held (it has no ``enable_caching`` switch). That is misuse for this target, so the
    oracle declines to judge it (never fed by the machines) instead of reporting CRASH."""
    target = load_target(aphrodite.spec, allocator_type="naive")
    config = Config(1, 1, 0, target.caps)
    runner, oracle = Runner(target, config), Oracle(config)
    oracle.initial_check(runner.snapshot())
    program = [ops.TableAllocate((0,)), ops.TrackerStart(), ops.SeqTrackerEdit(0, "computed",
                                                                                False)]
    with pytest.raises(OutOfContract, match="misuse"):
        for op in program:
            outcome, snapshot = runner.execute(op)
            oracle.step(op, outcome, snapshot)
