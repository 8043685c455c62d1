"""The manager level shares the block level's source lookup: a 0.33.0 tree named by
``$PREFIXCACHE_VLLM_V1_SOURCE`` (no dist-info, the version in ``vllm/_version.py``) loads as
0.33.0, under the default spec and 0.33.0's, and ``prefixcache check`` applies 0.33.0's manager
xfails file to it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from properties.families.v1 import upstream as v1
from properties.families.v1.request import loader
from properties.families.v1.request.family import FAMILY
from properties.families.v1.request.target import vllm_v033_manager, vllm_v1_manager
from tests.check.test_cli import check
from tests.v1.test_source_version import WHEEL, needs_wheel, unzip_closure

ROOT = Path(__file__).resolve().parents[3]
XFAILS = ROOT / "conformance" / "vllm-0.33.manager.xfails.json"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    assert WHEEL is not None
    src = unzip_closure(WHEEL, tmp_path / "src", roots=loader.ROOTS,
                        policy=loader.manager_policy())
    monkeypatch.setenv(v1.SOURCE_ENV, str(src))
    return src


@needs_wheel
def test_a_033_tree_loads_as_033_at_the_manager_level(tree: Path) -> None:
    for manager in (vllm_v1_manager(), vllm_v033_manager()):
        assert manager.version == "0.33.0" and manager.mods.origin == str(tree / "vllm")
        target = FAMILY.target_of(manager, "properties.upstream:vllm_v1_manager")
        assert (target.release, target.version_note) == ("0.33.0", "")
        assert f"from {tree / 'vllm'}" in target.describe()


@needs_wheel
def test_check_of_a_033_tree_applies_the_033_manager_xfails(tmp_path: Path, tree: Path) -> None:
    code, out, _ = check(tmp_path, "--allocator", "properties.upstream:vllm_v1_manager",
                         "--xfails-file", str(XFAILS), "--profile", "ci", "--max-examples", "5",
                         "--max-steps", "10")
    assert code == 0, out
    assert re.search(r"^  target: +vllm 0\.33\.0 KVCacheManager \(properties\.upstream:"
                     rf"vllm_v1_manager from {re.escape(str(tree / 'vllm'))}\)", out, re.M), out
    assert re.search(r"^  expected-failure replays +2 xfailed$", out, re.M), out
