"""Adopt-then-ratchet on a finding's size, and the mechanisms an expected failure absorbs.

A finding that has a size (a weak key's spread in bits, a free-count error, a hit-rate error)
is adopted with it (``--write-xfails`` records ``measures``); the adopted entry then accepts the
same finding at that size or better and refuses a worse one, which the reports call "worse than
the baseline". The targets are bundled allocators patched at two sizes
(``tests.check.ratchet_targets``). An entry that absorbs a mechanism not passing through its own
program's is reported too wide, and ``--strict-xfails`` fails on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from models.core.invariants import Invariants, Violation
from models.families.v0.capabilities import Config
from models.families.v0.operations import op_from_json
from properties.core.baseline import (
    Absorbed,
    Deviation,
    absorbed_by_entry,
    attach_run,
    canonical,
    deviation,
    mechanism_of,
    write_xfails,
)
from properties.core.plugin import ExpectedFailure, load_expected, note_worse
from properties.core.replay import run_program
from properties.core.targets import Target, load_target
from properties.families.v0 import hash_quality

ROOT = Path(__file__).resolve().parents[2]
TARGETS = "tests.check.ratchet_targets"
# One allocation, then the free count (+1 and +2 mutants) and the hit rate (1/8 and 1/4 high).
PROGRAM = [{"op": "allocate_mutable", "prev": None, "device": "gpu"},
           {"op": "hit_rate", "device": "gpu"}]
GEOMETRY = {"block_size": 2, "num_gpu_blocks": 4, "num_cpu_blocks": 2}


def _target(name: str) -> Target:
    return load_target(f"{TARGETS}:{name}")


def _finding(name: str) -> tuple[Violation, list[Any]]:
    """The violation of mutant ``name`` on :data:`PROGRAM`, with its program attached."""
    target = _target(name)
    program = [op_from_json(op) for op in PROGRAM]
    with pytest.raises(Violation) as info:
        run_program(target, Config(caps=target.caps, **GEOMETRY), program)
    violation = info.value
    ran = program[: (violation.step or 0) + 1]
    attach_run(violation, target, Config(caps=target.caps, **GEOMETRY), ran, "script")
    return violation, ran


def _adopt(violation: Violation, tmp_path: Path) -> ExpectedFailure:
    written = write_xfails(tmp_path / "adopted.json", [deviation(violation, "t", "prefix_caching")])
    assert len(written) == 1 and written[0]["measures"], written
    (entry,) = load_expected(str(tmp_path / "adopted.json"))
    return entry


@pytest.mark.parametrize(("adopted", "worse", "measure"), [
    ("free_count_plus_1", "free_count_plus_2", "free count error (blocks)"),
    ("hit_rate_plus_eighth", "hit_rate_plus_quarter", "hit rate error"),
])
def test_an_adopted_size_accepts_the_same_and_refuses_worse(
        adopted: str, worse: str, measure: str, tmp_path: Path) -> None:
    first, _ = _finding(adopted)
    entry = _adopt(first, tmp_path)
    assert [m.name for m in entry.measures] == [measure]
    again, again_history = _finding(adopted)  # unchanged target: the gate passes
    assert entry.matches(again, again_history, "prefix_caching")
    bigger, bigger_history = _finding(worse)
    assert deviation(bigger, "t", "prefix_caching").signature == deviation(
        first, "t", "prefix_caching").signature  # the same kind of bug, only bigger
    assert entry.matches_but_size(bigger, bigger_history, "prefix_caching")
    assert not entry.matches(bigger, bigger_history, "prefix_caching")
    how = note_worse([entry], bigger, bigger_history, "prefix_caching")
    assert measure in how and "worse than the baseline" in how
    assert "worse than the baseline" in "\n".join(bigger.__notes__)
    dev = deviation(bigger, "t", "prefix_caching")
    assert dev.worse == how and dev.measures == bigger.measures
    assert Deviation.from_json(json.loads(json.dumps(dev.to_json()))) == dev


def _weak_key_finding(name: str) -> Violation:
    with pytest.raises(Violation) as info:
        hash_quality.check(_target(name))
    return info.value


def test_a_weak_key_adopted_refuses_a_weaker_one(tmp_path: Path) -> None:
    """Python's tuple hash (64 bits, near-miss collisions) adopted; the same key cut to 58 bits
    collides the same way (same signature) but spans fewer bits: worse."""
    weak, weaker = _weak_key_finding("tuple_hash_key"), _weak_key_finding("tuple_hash_key_58_bits")
    spans = {m.name: m.value for m in weak.measures}, {m.name: m.value for m in weaker.measures}
    assert spans[0]["key spread (bits)"] == 64 and spans[1]["key spread (bits)"] == 58
    history = getattr(weak, "prefixcache_history", None)
    entry = ExpectedFailure("weak-key", weak.family, "adopted", {}, [], measures=weak.measures)
    assert entry.matches(weak, history)
    assert entry.matches(_weak_key_finding("tuple_hash_key"), history)
    assert not entry.matches(weaker, getattr(weaker, "prefixcache_history", None))
    assert "key spread (bits) 58 is worse than the baseline's 64" in entry.worse(weaker)


def _pytest(tmp_path: Path, *args: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "--rootdir", str(ROOT), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_gate_on_a_weak_key_end_to_end(tmp_path: Path) -> None:
    """``--all --write-xfails`` on the tuple-hash key writes its HASH finding with its sizes;
    ``--xfails-file`` then passes the same key and fails the weaker one, saying so."""
    suite = [str(ROOT / "properties/families/v0/test_hash_quality.py"),
             str(ROOT / "properties/families/v0/test_expected_failures.py")]
    baseline = tmp_path / "weak.xfails.json"
    code, out = _pytest(tmp_path, *suite, f"--allocator={TARGETS}:tuple_hash_key", "--all",
                        f"--write-xfails={baseline}")
    assert code == 1, out  # the deviation is new in the adoption run
    entries = json.loads(baseline.read_text(encoding="utf-8"))
    assert len(entries) == 1 and entries[0]["family"] == "HASH", entries
    assert {m["name"] for m in entries[0]["measures"]} == {
        "colliding contents among the searched", "key spread (bits)"}
    code, out = _pytest(tmp_path, *suite, f"--allocator={TARGETS}:tuple_hash_key",
                        f"--xfails-file={baseline}")
    assert code == 0, out
    code, out = _pytest(tmp_path, *suite, f"--allocator={TARGETS}:tuple_hash_key_58_bits",
                        f"--xfails-file={baseline}")
    assert code == 1, out
    assert "worse than the baseline: key spread (bits) 58 is worse than the baseline's 64" in out


def test_an_entry_absorbing_two_mechanisms_is_too_wide() -> None:
    own = ("allocate_mutable", "swap")
    one = Absorbed("e", {own: 3}, own)
    assert not one.too_wide and one.distinct == [own]
    unlike = Absorbed("e", {("allocate_mutable", "device_swap"): 1}, own)
    assert unlike.too_wide and len(unlike.distinct) == 2
    two = Absorbed("e", {own: 1, ("table_allocate",): 1})
    assert two.too_wide
    assert Absorbed("e", {}, None, (own,)).distinct == [own]
    listed = Absorbed("e", {own: 1, ("table_allocate",): 2}, own, (own, ("table_allocate",)))
    assert not listed.too_wide and listed.distinct == [own, ("table_allocate",)]
    assert Absorbed("e", {("fork",): 1}, own, (own,)).too_wide
    # Steps around the defect's own are how its consequence showed; fewer are another way in.
    around = Absorbed("e", {("allocate_mutable", "fork", "swap", "free"): 1}, own)
    assert not around.too_wide and len(around.distinct) == 2
    assert Absorbed("e", {("swap",): 1}, own).too_wide
    assert Absorbed("e", {("free", "swap"): 1}, None, (own,)).too_wide


def test_a_mechanism_is_the_shrunk_programs_kinds() -> None:
    target = _target("free_count_plus_1")
    config = Config(caps=target.caps, **GEOMETRY)
    padded = [op_from_json(op) for op in (
        {"op": "hit_rate", "device": "cpu"}, {"op": "hit_rate", "device": "gpu"}, PROGRAM[0])]
    with pytest.raises(Violation) as info:
        run_program(target, config, padded)
    assert mechanism_of(target, config, padded, info.value) == ()


def test_strict_xfails_fails_on_a_too_wide_entry(tmp_path: Path) -> None:
    """A hand-written entry accepting every HIT and ATOMIC finding of the hit-twice mutant
    absorbs several mechanisms: reported too wide; with --strict-xfails the check fails (16
    examples: at 8 the machines meet only the entry's own mechanism)."""
    wide = [{"id": "any-hit", "family": "HIT", "explanation": "too wide on purpose",
             "config": {"block_size": 2, "num_gpu_blocks": 4, "num_cpu_blocks": 2},
             "program": [{"op": "allocate_immutable", "prev": None, "tokens": [1, 2],
                          "device": "gpu"},
                         {"op": "allocate_immutable", "prev": None, "tokens": [1, 2],
                          "device": "gpu"}],
             "match": {"families": ["ATOMIC"]}}]
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(wide), encoding="utf-8")
    args = [sys.executable, "-m", "properties.core.cli", "check", "--allocator",
            "tests.check.targets:hit_twice", "--profile", "ci", "--max-examples", "16",
            "--max-steps", "12", "--xfails-file", str(path), "--report-dir",
            str(tmp_path / "r")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    loose = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=600, check=False)
    out = loose.stdout + loose.stderr
    assert "any-hit:" in out and "TOO WIDE" in out, out
    assert loose.returncode == 0, out
    data = json.loads((tmp_path / "r" / "conformance.json").read_text(encoding="utf-8"))
    (row,) = data["absorbed"]
    assert row["id"] == "any-hit" and row["too_wide"] and len(row["mechanisms"]) >= 2, row
    strict = subprocess.run([*args, "--strict-xfails"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "--strict-xfails fails the check" in strict.stdout


def test_a_mechanism_is_compared_as_the_calls_it_amounts_to() -> None:
    """A block table's free and a swap by hand are the allocator's free and swap; a run of one
    call is one step; a tracker's bookkeeping is no call: all of it is one defect's
    fingerprint, and a declared mechanism is compared the same way."""
    family = _target("free_count_plus_1").family_object
    table_form = ("tracker_start", "table_allocate", "table_free", "table_allocate",
                  "seq_track")
    assert canonical(family, table_form) == ("allocate_immutable", "free", "allocate_immutable")
    assert canonical(family, ("allocate_immutable_chain", "allocate_immutable", "free",
                              "free", "mark_stale_ids")) == (
        "allocate_immutable", "free", "mark_stale_ids")
    assert canonical(family, ("allocate_mutable", "device_swap")) == ("allocate_mutable", "swap")
    # Operations of their own stay apart: a mutable block is not an immutable one.
    assert canonical(family, ("allocate_mutable", "free")) != canonical(
        family, ("allocate_immutable", "free"))
    assert canonical(None, ("a", "a", "b")) == ("a", "b")
    entry = ExpectedFailure("e", Invariants.CRASH, "", {}, [],
                            mechanisms=(("allocate_immutable_chain", "free"),))
    (row,) = absorbed_by_entry([entry], {"e": Absorbed(
        "e", {("allocate_immutable", "free"): 2})}, family)
    assert not row.too_wide, row


def test_a_replay_stands_for_its_own_entry_only(tmp_path: Path) -> None:
    """An entry whose own program no longer shows its own defect fails its replay, even when
    another entry would absorb what the program raises now (a wide entry must not keep a stale
    one alive)."""
    program = [{"op": "allocate_immutable", "prev": None, "tokens": [1, 2], "device": "gpu"},
               {"op": "allocate_immutable", "prev": None, "tokens": [1, 2], "device": "gpu"}]
    config = {"block_size": 2, "num_gpu_blocks": 4, "num_cpu_blocks": 2}
    entries = [{"id": "any-hit", "family": "HIT", "explanation": "every HIT finding",
                "config": config, "program": program},
               {"id": "stale", "family": "HIT", "explanation": "no longer what it was",
                "config": config, "program": program,
                "match": {"message": "^a message this target never writes$"}}]
    path = tmp_path / "xfails.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
         str(ROOT / "properties" / "families" / "v0" / "test_expected_failures.py"),
         "--allocator", "tests.check.targets:hit_twice", "--xfails-file", str(path),
         "-o", f"rootdir={ROOT}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    out = run.stdout + run.stderr
    assert "1 failed" in out and "1 xfailed" in out, out
    assert "test_expected_failure[stale]" in out and "FAILED" in out, out
