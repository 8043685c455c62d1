"""Third-party conformance of vLLM 0.8's real block allocator (``conformance/``).

Every entry of ``conformance/vllm-0.8.xfails.json`` must still reproduce against the vllm-block
wheel (a violation the entry matches) and its program must pass against the bundled allocator;
its reproducer script must print the violation. The expected-failures mechanism of the plugin is
checked here too: a stale entry and a violation of another family both fail the replay test.
The wheel-dependent tests skip, with the fetch command, when the wheel is not cached.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from models.capabilities import Config
from models.families import Family, Violation
from models.operations import Op, op_from_json
from properties.plugin import ExpectedFailure, load_expected
from properties.replay import run_program
from properties.targets import Target, load_target
from properties.upstream import FETCH_COMMAND, UpstreamSourceMissing, load_vllm_v0

ROOT = Path(__file__).resolve().parents[2]
XFAILS = ROOT / "conformance" / "vllm-0.8.xfails.json"
SCRIPTS = ROOT / "conformance" / "vllm-0.8"
VLLM = "properties.upstream:vllm_v0_allocator"
BUNDLED = "prefixcache.cpu_gpu_block_allocator:CpuGpuBlockAllocator.create"
CLASSES = {"real upstream bug", "upstream design deviation"}

ENTRIES = load_expected(str(XFAILS))
RAW: dict[str, dict[str, Any]] = {e["id"]: e for e in json.loads(XFAILS.read_text("utf-8"))}


@pytest.fixture(scope="module")
def vllm() -> Iterator[Target]:
    try:
        load_vllm_v0()
    except UpstreamSourceMissing:
        pytest.skip(f"vllm-block wheel not cached; fetch it with `{FETCH_COMMAND}`")
    logging.disable(logging.WARNING)  # upstream warns on every refused prefix-cache reset
    try:
        yield load_target(VLLM)
    finally:
        logging.disable(logging.NOTSET)


@pytest.fixture(scope="module")
def bundled() -> Target:
    return load_target(BUNDLED)


def _program(entry: ExpectedFailure) -> list[Op]:
    return [op_from_json(op) for op in entry.program]


def _run(target: Target, entry: ExpectedFailure) -> None:
    run_program(target, Config(caps=target.caps, **entry.config), _program(entry))


def _violation(target: Target, entry: ExpectedFailure) -> Violation:
    with pytest.raises(Violation) as info:
        _run(target, entry)
    return info.value


# --------------------------------------------------------------------------- the file itself


def test_entries_are_well_formed() -> None:
    ids = [e.id for e in ENTRIES]
    assert len(ids) == len(set(ids)) and ids
    for entry in ENTRIES:
        raw = RAW[entry.id]
        assert raw.get("class") in CLASSES, entry.id
        assert 1 <= len(entry.program) <= 10, entry.id
        assert len(entry.explanation) > 80, entry.id
        assert entry.family is not Family.CRASH or entry.families or entry.after, entry.id
        assert (SCRIPTS / f"{entry.id}.py").is_file(), f"render it: {entry.id}"


# --------------------------------------------------------------------------- against vLLM


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_entry_reproduces_against_vllm(vllm: Target, entry: ExpectedFailure) -> None:
    violation = _violation(vllm, entry)
    history = _program(entry)[: (violation.step or 0) + 1]
    assert violation.family is entry.family, str(violation)
    assert entry.matches(violation, history), str(violation)
    assert violation.step == len(entry.program) - 1, "the program should end at its violation"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_entry_passes_against_bundled(bundled: Target, entry: ExpectedFailure) -> None:
    _run(bundled, entry)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_reproducer_script_prints_the_violation(vllm: Target, entry: ExpectedFailure) -> None:
    result = subprocess.run([sys.executable, str(SCRIPTS / f"{entry.id}.py")],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "observed:" in result.stdout
    assert f"violation: [{entry.family.value}]" in result.stdout, result.stdout


# --------------------------------------------------------------------------- matching rules


def _entry(**match: Any) -> ExpectedFailure:
    return ExpectedFailure("e", Family.TABLE, "", {}, [], **match)


def test_matching_narrows_by_family_op_message_history_and_tokens() -> None:
    swap = op_from_json({"op": "swap", "blocks": [0], "src": "cpu", "dst": "gpu"})
    free = op_from_json({"op": "free", "block": 0})
    wild = op_from_json({"op": "allocate_immutable", "prev": None, "tokens": [2**61],
                         "device": "gpu", "extra_hash": None})
    alloc = op_from_json({"op": "allocate_mutable", "prev": None, "device": "gpu"})
    table = Violation(Family.TABLE, "block 1: id").at(alloc, 2)
    content = Violation(Family.CONTENT, "block 1: shares id").at(alloc, 2)
    assert _entry().matches(table) and not _entry().matches(content)
    assert _entry(families=(Family.CONTENT,)).matches(content)
    assert _entry(ops=("allocate_mutable",)).matches(table)
    assert not _entry(ops=("append",)).matches(table)
    assert _entry(message="^block").matches(table)
    assert not _entry(message="shares").matches(table)
    after = _entry(after=(("swap", "free"),))
    assert after.matches(table, [swap, free, alloc])
    assert not after.matches(table, [free, swap, alloc])
    assert not after.matches(table, [swap, alloc, free])  # the failing op itself is not "before"
    tokens = _entry(tokens=frozenset({2**61}))
    assert tokens.matches(table, [wild, alloc]) and not tokens.matches(table, [alloc])


# --------------------------------------------------------------------------- plugin behaviour


def _replay_session(tmp_path: Path, entries: list[dict[str, Any]], spec: str) -> str:
    path = tmp_path / "xfails.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "properties" / "test_expected_failures.py"),
         "-p", "no:cacheprovider", "-q", "-rxXfE", f"--allocator={spec}",
         f"--xfails-file={path}", "--rootdir", str(ROOT)],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT)
    return f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"


def test_stale_entry_is_reported(tmp_path: Path) -> None:
    """Against the bundled allocator no vLLM entry fails: each is reported as stale."""
    entry = RAW["swap-pool-crosstalk"]
    out = _replay_session(tmp_path, [entry], BUNDLED)
    assert out.startswith("exit 1"), out
    assert "no longer fails: remove the entry" in out


def test_unexpected_family_still_fails(vllm: Target, tmp_path: Path) -> None:
    entry = dict(RAW["swap-pool-crosstalk"], family="HASH", match={})
    out = _replay_session(tmp_path, [entry], VLLM)
    assert out.startswith("exit 1"), out
    assert "[TABLE]" in out
