"""The replay scripts of the v1 pool's robustness findings whose probe picks blocks from the
model's lists (``cache_beyond_hashes`` on 0.33.0 and 0.34.0, ``unpin_unheld`` on 0.34.0): each
script makes the same call on the same blocks and prints the change the finding names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from models.families.v1 import ops
from models.families.v1.pool_model import PoolConfig
from properties.families.v1 import upstream
from properties.families.v1.executor import run_program
from properties.families.v1.reproducer import robustness_script
from properties.families.v1.targets import load

ROOT = Path(__file__).resolve().parents[2]
CONFIG = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2,))
# One request with two hashes, keyed into two held blocks: free blocks remain for the probes.
PROGRAM = [ops.Req(tokens=(1, 2, 3, 4)), ops.GetNew(2), ops.CacheFull(0, (1, 2), 0, 2, 0)]

CASES = [("0.33.0", "cache_beyond_hashes", "keyed"),
         ("0.34.0", "cache_beyond_hashes", "keyed"),
         ("0.34.0", "unpin_unheld", "ref_cnt")]


def _printed(stdout: str, prefix: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(prefix + " ")]


@pytest.mark.parametrize(("version", "kind", "changes"), CASES,
                         ids=[f"{v}-{k}" for v, k, _ in CASES])
def test_the_script_replays_the_finding(version: str, kind: str, changes: str,
                                        tmp_path: Path) -> None:
    if upstream.cached_wheel(version) is None:
        pytest.skip(f"no vllm {version} wheel cached: `{upstream.FETCH_COMMAND} --version "
                    f"{version}`")
    target = load(f"properties.upstream:vllm_v{version[:4].replace('.', '')}_block_pool")
    ex = run_program(target, CONFIG, PROGRAM)
    finding = ex.probe(kind, 0)
    assert finding is not None and changes.replace("keyed", "block_hash") in finding.detail, \
        finding
    assert ex.probe_call["ids"], ex.probe_call  # the blocks the probe took
    script = tmp_path / f"{kind}.py"
    script.write_text(robustness_script(target, CONFIG, PROGRAM, kind, 0, ex.probe_call),
                      encoding="utf-8")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300,
                         check=False)
    assert run.returncode == 0, run.stderr
    assert "misuse probe" not in script.read_text(encoding="utf-8")  # a real call, no comment
    before, after = _printed(run.stdout, changes)[-2:]
    assert before != after, run.stdout
    if kind == "unpin_unheld":  # the held block lost its reference before the assert fired
        assert "raised AssertionError" in run.stdout, run.stdout
