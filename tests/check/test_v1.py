"""``prefixcache check`` for the v1 family, end to end (subprocess, small budgets): the bundled
pool conforms with ``--family v1``; vLLM 0.34.0's pool is detected from ``--allocator``, conforms
with its xfails file and, without it, fails (exit 1) listing deviations the file knows, each
with a reproducer script that raises the violation when run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from properties.core import selection
from properties.families.v1 import dynamo, upstream
from properties.families.v1.family import FAMILY
from tests.check.test_cli import check

ROOT = Path(__file__).resolve().parents[2]
BUDGET = ("--profile", "ci", "--max-examples", "30", "--max-steps", "20")
UPSTREAM = "properties.upstream:vllm_v1_block_pool"
XFAILS = ROOT / "conformance" / "vllm-0.34.xfails.json"

needs_wheel = pytest.mark.skipif(
    upstream.cached_wheel("0.34.0") is None and not os.environ.get(upstream.SOURCE_ENV),
    reason=f"no vllm 0.34.0 wheel cached (`{upstream.FETCH_COMMAND}`)")


def test_the_bundled_pool_conforms_with_family_v1(tmp_path: Path) -> None:
    code, out, data = check(tmp_path, "--family", "v1", *BUDGET)
    assert code == 0, out
    assert re.search(r"^  target: +prefixcache .*prefixcache\.v1\.core\.block_pool:BlockPool, "
                     r"v1 BlockPool", out, re.M), out
    assert re.search(r"^  pool level +\d+ examples +\d+ steps +[\d.]+ s  findings 0 +passed$",
                     out, re.M), out
    assert "verdict: CONFORMS (0 distinct deviation(s)" in out
    assert data["conforming"] is True
    # The events are judged by Dynamo's router too when its wheel is cached; the header says
    # which (tests/v1/test_router.py judges the router itself).
    router = dynamo.status()  # the check's process has this one's HOME and environment
    assert router in (f"Dynamo RadixTree {dynamo.VERSION}",
                      f"none (fetch with `{dynamo.FETCH_COMMAND}`)", f"off (${dynamo.SWITCH_ENV})")
    assert re.search(rf"^  target: .*; router: {re.escape(router)}$", out, re.M), out
    assert list(data["tests"]) == ["families/v1/machines/test_pool.py::TestPoolLevel::"
                                   "runTest"]
    # Only what the v1 family checks gets a verdict: v1 has no copy-on-write or device swaps.
    assert set(data["families"]) >= {"RC", "CACHE", "HASH", "ATOMIC"}
    assert not {"COW", "SWAP"} & set(data["families"]), data["families"]
    assert not re.search(r"^(COW|SWAP) ", out, re.M), out


@pytest.mark.parametrize("args", [("--family", "v9"),
                                  ("--family", "v1", "--allocator-type", "naive"),
                                  ("--family", "v1", "--disable-feature", "lru")])
def test_usage_errors_exit_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    code, out, _ = check(tmp_path, *args, *BUDGET)
    assert code == 2, out


def test_v1_targets_are_detected_from_the_spec() -> None:
    assert FAMILY.accepts("prefixcache.v1.core.block_pool:BlockPool")
    assert FAMILY.accepts(UPSTREAM)
    assert FAMILY.accepts("properties.upstream:vllm_v011_block_pool")
    for v0 in ("prefixcache.cpu_gpu_block_allocator:CpuGpuBlockAllocator.create",
               "properties.upstream:vllm_v0_allocator", "json:dumps", "no.such:thing"):
        assert not FAMILY.accepts(v0), v0
    assert selection.family_of(UPSTREAM) == "v1"
    assert selection.family_of("properties.upstream:vllm_v0_allocator") == "v0"
    assert selection.family_of(None, "v1") == "v1"


@needs_wheel
def test_vllm_034_conforms_with_its_xfails_file(tmp_path: Path) -> None:
    code, out, data = check(tmp_path, "--allocator", UPSTREAM, "--xfails-file", str(XFAILS),
                            *BUDGET)
    assert code == 0, out
    assert "vllm 0.34.0 (properties.upstream:vllm_v1_block_pool, v1 BlockPool)" in out
    ids = sorted(e["id"] for e in json.loads(XFAILS.read_text(encoding="utf-8")))
    assert f"expected failures met: {len(ids)} entries ({', '.join(ids)})" in out
    assert re.search(rf"^  expected-failure replays +{len(ids)} xfailed$", out, re.M), out
    assert re.search(r"^CACHE +expected failure", out, re.M)
    assert data["conforming"] is True


@needs_wheel
def test_vllm_034_without_xfails_lists_known_deviations_with_reproducers_then_ratchets(
        tmp_path: Path) -> None:
    """One ``--all`` run without an xfails file answers both: it fails listing every distinct
    deviation it met (each one the shipped file knows), each with a reproducer, and
    (``--write-xfails``, which changes nothing else in the run) writes them as an xfails file,
    which a second ``--all`` run (the same examples) then accepts."""
    written = tmp_path / "adopted.xfails.json"
    # 30 examples of the machine with the transfer and copy rules find no deviation of 0.34;
    # 80 find several.
    finding_budget = ("--profile", "ci", "--max-examples", "80", "--max-steps", "20", "--all")
    code, out, data = check(tmp_path, "--allocator", UPSTREAM, "--write-xfails", str(written),
                            *finding_budget)
    assert code == 1, out
    assert "verdict: DOES NOT CONFORM" in out
    entries = json.loads(XFAILS.read_text(encoding="utf-8"))
    found = [f for f in data["findings"] if not f["expected"]]
    assert found, out
    for finding in found:
        # The violation's own message: "[FAMILY] message at step N: op", then details.
        head = finding["message"].splitlines()[0].split(" at step ")[0]
        head = head.removeprefix(f"[{finding['family']}] ")
        assert any(finding["family"] == e["family"] and re.search(e["match"]["message"], head)
                   for e in entries), finding["message"]
        assert finding["program"] and "check_program(" in finding["script"]
    script = tmp_path / "reproducer.py"
    script.write_text(found[0]["script"], encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode != 0 and "Violation" in run.stderr, run.stdout + run.stderr
    assert found[0]["message"].splitlines()[0].split(" at step ")[0] in run.stderr

    adopted = json.loads(written.read_text(encoding="utf-8"))
    assert adopted and all(e["allocator_type"] == "block_pool" and not e.get("flaky")
                           for e in adopted), adopted
    code, out, _ = check(tmp_path, "--allocator", UPSTREAM, "--xfails-file", str(written),
                         *finding_budget)
    assert code == 0, out
    assert f"expected failures met: {len(adopted)} entries" in out


def test_a_stale_entry_fails_the_check(tmp_path: Path) -> None:
    """An entry whose program no longer fails (here: a clean program on the bundled pool) is
    reported, exit 1: a fixed bug is noticed and its entry removed."""
    stale = [{"id": "fixed-long-ago", "family": "CACHE", "class": "real upstream bug",
              "explanation": "a program that runs clean", "config": {
                  "num_blocks": 6, "hash_block_size": 2, "group_block_sizes": [2],
                  "events": True},
              "program": [{"op": "get_new_blocks", "n": 1}, {"op": "take_events"}],
              "match": {"ops": ["take_events"]}}]
    path = tmp_path / "stale.xfails.json"
    path.write_text(json.dumps(stale), encoding="utf-8")
    code, out, data = check(tmp_path, "--family", "v1", "--xfails-file", str(path), *BUDGET)
    assert code == 1, out
    assert re.search(r"^  expected-failure replays +1 failed$", out, re.M), out
    assert "error: families/v1/machines/test_pool.py::test_expected_failure[fixed-long-ago]" \
        in out
    assert data["conforming"] is False


def test_plain_pytest_takes_the_core_options_for_a_pool(tmp_path: Path) -> None:
    """``pytest`` on the v1 machines with the core's ``--allocator`` and ``--xfails-file``: the
    pool machine and one replay per entry (the v1-only ``--pool`` options are gone)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(FAMILY.machines), "--collect-only", "-q",
         "-p", "no:cacheprovider", "--rootdir", str(ROOT), "--allocator",
         "prefixcache.v1.core.block_pool:BlockPool", "--xfails-file", str(XFAILS)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    tests = [line for line in run.stdout.splitlines() if "::" in line]
    assert "properties/families/v1/machines/test_pool.py::TestPoolLevel::runTest" in tests
    assert sum("test_expected_failure[" in t for t in tests) == len(
        json.loads(XFAILS.read_text(encoding="utf-8")))
