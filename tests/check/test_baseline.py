"""Deviations and the xfails file written from them: merging across tests and workers, and the
round trip (a written entry replays its program and matches its own deviation, no other)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fuzz.core.machine_harness import harness_for
from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.invariants import Family
from models.families.v0.operations import op_from_json
from properties.core import selection
from properties.core.baseline import (
    Deviation,
    attach,
    deviation,
    merge,
    shrink_and_attach,
    write_xfails,
)
from properties.core.plugin import ExpectedFailure, load_expected, parse_expected
from properties.core.replay import run_program
from properties.core.shrink import executed
from properties.core.signature import Signature, signature
from properties.core.targets import Target, load_target

SWAP_REVERSED = "tests.zoo.v0.broken:swap_mapping_reversed"


def _dev(op: str, count: int, program_len: int, test: str) -> Deviation:
    sig = Signature("CRASH", "prefix_caching", op, "x #")
    program = [{"op": "free", "block": 0}] * program_len
    return Deviation(sig, f"[CRASH] x {program_len}", "x 1", {"block_size": 1,
                     "num_gpu_blocks": 1, "num_cpu_blocks": 0}, program, "script", count, [test])


def test_merge_adds_counts_joins_tests_and_keys_on_the_mechanism() -> None:
    merged: dict[str, Deviation] = {}
    merge(merged, [_dev("free", 2, 5, "a"), _dev("swap", 1, 3, "a")])
    merge(merged, [_dev("free", 3, 5, "b"), _dev("free", 1, 2, "a")])
    free = merged[_dev("free", 0, 5, "").key]
    assert (free.count, free.tests, len(free.program)) == (5, ["a", "b"], 5)
    assert len(merged) == 3  # a shorter program of the same signature: another mechanism
    assert Deviation.from_json(json.loads(json.dumps(free.to_json()))) == free


def test_a_deviation_covers_histories_that_contain_its_mechanism() -> None:
    dev = _dev("free", 1, 3, "a")  # program: free, free, free (the last one fails)
    assert dev.steps_before == ["free", "free"]
    assert dev.covers(["swap", "free", "append", "free"])
    assert not dev.covers(["swap", "free"])
    assert _dev("free", 1, 1, "a").covers([])


def test_after_reads_the_mechanism_where_it_is_known() -> None:
    """An entry's ``after`` names what the failure needs: a program that merely held a swap
    before an unrelated failure is not absorbed by an entry that wants one."""
    entry = parse_expected([{"id": "needs-swap", "family": "CRASH", "explanation": "",
                             "config": {}, "program": [],
                             "match": {"ops": ["free"], "after": [["swap"]]}}])[0]
    violation = Violation(Family.CRASH, "x").at(ops.Free(0), 2)
    history = [ops.AllocateMutable(None), ops.Swap((0,), ops.Dev.GPU, ops.Dev.CPU),
               ops.Free(0)]
    assert entry.matches(violation, history)  # no mechanism known: the program decides
    assert entry.matches(violation, history, mechanism=lambda: ("allocate_mutable", "swap"))
    assert not entry.matches(violation, history, mechanism=lambda: ("allocate_mutable",))


@pytest.fixture(scope="module")
def found() -> tuple[Target, list[Violation]]:
    """The swap-reversing zoo mutant's violations on seeded random inputs of the block-level
    machine (the fuzzers' route): the first of each signature, shrunk and carrying its
    program."""
    target = load_target(SWAP_REVERSED)
    rng = random.Random(0)
    violations: list[Violation] = []
    seen: set[Signature] = set()
    with selection.kept():
        harness = harness_for("block_level", family="v0").bind(target)
        for _ in range(40):
            result = harness.run(rng.randbytes(512))
            violation = result.violation
            if violation is None or signature(violation, target.allocator_type) in seen:
                continue
            seen.add(signature(violation, target.allocator_type))
            log = executed(target, result.config, list(result.program))
            shrink_and_attach(target, result.config, log, violation)
            violations.append(violation)
    return target, violations


def test_written_entries_replay_and_match_only_their_own_deviation(
        found: tuple[Target, list[Violation]], tmp_path: Path) -> None:
    target, violations = found
    merged: dict[str, Deviation] = {}
    merge(merged, [deviation(v, "t", target.allocator_type) for v in violations])
    path = tmp_path / "x.json"
    written = write_xfails(path, merged.values())
    assert len(written) == len([d for d in merged.values() if d.program]) >= 1
    entries = load_expected(str(path))
    assert len({e.id for e in entries}) == len(entries)
    for entry, raw in zip(entries, written, strict=True):
        assert entry.allocator_type == raw["allocator_type"] == "prefix_caching"
        program = [op_from_json(op) for op in entry.program]
        with pytest.raises(Violation) as info:
            run_program(target, Config(caps=target.caps, **entry.config), program)
        history = program[: (info.value.step or 0) + 1]
        covering = [e.id for e in entries if e.matches(info.value, history, "prefix_caching")]
        assert covering == [entry.id], str(info.value)
        assert not entry.matches(info.value, history, "naive")


def test_writing_keeps_adopted_entries_and_gives_unique_ids(tmp_path: Path) -> None:
    adopted = [{"id": "crash-free-1", "family": "CRASH", "explanation": "kept as written",
                "config": {}, "program": []}]
    written = write_xfails(tmp_path / "x.json", [_dev("free", 1, 1, "a")], adopted)
    assert [e["id"] for e in written] == ["crash-free-1", "crash-free-2"]
    assert written[0] == adopted[0]
    assert "after" not in written[1]["match"]  # a one-step program: no mechanism before it
    assert written[1]["match"] == {"allocator_types": ["prefix_caching"],
                                   "message": r"^x\ -?\d+(?:\.\d+)?(?:, -?\d+(?:\.\d+)?)*"
                                              r"(?:,(?=\)))?$", "ops": ["free"],
                                   "mechanism": []}


def test_a_deviation_without_a_program_is_not_written(tmp_path: Path) -> None:
    bare = deviation(Violation(Family.LEAK, "initial state 3"), "t", "naive")
    assert bare.signature == signature(Violation(Family.LEAK, "initial state 9"), "naive")
    assert write_xfails(tmp_path / "x.json", [bare]) == []


def test_attach_records_the_shown_violation_and_the_type() -> None:
    v = Violation(Family.RC, "count 2")
    shown = Violation(Family.RC, "count 1")
    attach(v, {"block_size": 2, "num_gpu_blocks": 3, "num_cpu_blocks": 1}, [], "naive", "s",
           shown)
    dev = deviation(v, "t", "prefix_caching")
    assert dev.signature.allocator_type == "naive" and dev.text == "count 1"
    assert dev.config == {"block_size": 2, "num_gpu_blocks": 3, "num_cpu_blocks": 1}


def test_versions_and_avoid_are_read_for_every_family() -> None:
    """``versions`` limits an entry to those releases (absent: all); ``avoid`` names generator
    features for the family's machines to leave out."""
    raw = {"id": "e", "family": "CRASH", "explanation": "", "config": {}, "program": []}
    limited, anywhere = _parse([{**raw, "versions": ["0.33.0"], "avoid": ["mm", "duplicates"]},
                                {**raw, "id": "f"}])
    assert limited.applies("0.33.0") and not limited.applies("0.34.0")
    assert not limited.applies("")
    assert anywhere.applies("0.34.0") and anywhere.applies("")
    assert limited.avoid == frozenset({"mm", "duplicates"}) and anywhere.avoid == frozenset()


def _parse(data: list[dict[str, object]]) -> list[ExpectedFailure]:
    return parse_expected(data)
