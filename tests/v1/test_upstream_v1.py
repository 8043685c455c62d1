"""The v1 loader: real upstream modules without torch, isolated, memoised, patchable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from properties.core.sources import UpstreamSourceInvalid, UpstreamSourceMissing
from properties.families.v1 import upstream as v1

RELEASES = [v for v in v1.SUPPORTED_VERSIONS if v1.cached_wheel(v) is not None]
needs_wheel = pytest.mark.skipif(
    not RELEASES, reason=f"no vllm wheel cached: run `{v1.FETCH_COMMAND}`"
)


@pytest.fixture(params=RELEASES or [pytest.param(None, marks=needs_wheel)])
def mods(request: pytest.FixtureRequest) -> v1.V1Modules:
    return v1.load_vllm_v1(version=request.param)


def test_loads_real_code_without_torch_and_restores_sys_modules(mods: v1.V1Modules) -> None:
    # Other tests of this process may have imported torch (the request level) or registered
    # vLLM 0.8's block modules as ``vllm`` (the v0 loader): the load itself is checked in a
    # fresh interpreter, which must end with no torch and no vllm module at all.
    script = ("import sys; from properties.families.v1 import upstream as v1; "
              f"v1.load_vllm_v1(version={mods.version.split()[1]!r}); "
              "sys.exit('torch' in sys.modules or any(n == 'vllm' or n.startswith('vllm.') "
              "for n in sys.modules))")
    assert subprocess.run([sys.executable, "-c", script], check=False).returncode == 0
    assert not [n for n in sys.modules if n.startswith("vllm.v1")]
    assert mods.block_pool.__file__ is None or "whl" in (mods.block_pool.__spec__.origin or "")
    assert mods.version.startswith("vllm ")
    assert "vllm.v1.request" in mods.stubbed


def test_memoised_and_patch_is_separate(mods: v1.V1Modules) -> None:
    version = mods.version.split()[1]
    assert v1.load_vllm_v1(version=version) is mods
    patched = v1.load_vllm_v1(
        version=version,
        patches=[("v1.core.block_pool", "def get_num_free_blocks(self)",
                  "def get_num_free_blocks(self, _patched=True)")],
    )
    assert patched is not mods and patched.block_pool is not mods.block_pool
    assert "_patched" in patched.block_pool.BlockPool.get_num_free_blocks.__code__.co_varnames


def test_patch_must_match_exactly_once(mods: v1.V1Modules) -> None:
    version = mods.version.split()[1]
    with pytest.raises(UpstreamSourceInvalid, match="occurs 0 times"):
        v1.load_vllm_v1(version=version, patches=[("v1.core.block_pool", "no such text", "")])


def test_pool_behaves(mods: v1.V1Modules) -> None:
    caps = v1.capabilities(mods)
    args = (6, True, 2) if caps.hash_block_size else (6, True)
    pool = mods.block_pool.BlockPool(*args)
    assert pool.null_block.block_id == 0 and pool.get_num_free_blocks() == 5
    blocks = pool.get_new_blocks(2)
    assert [b.ref_cnt for b in blocks] == [1, 1]
    with pytest.raises(ValueError):
        pool.get_new_blocks(4)


@needs_wheel
def test_capabilities_differ_between_releases() -> None:
    if len(RELEASES) < 2:
        pytest.skip("only one release cached")
    new, old = (v1.capabilities(v1.load_vllm_v1(version=v)) for v in ("0.33.0", "0.11.0"))
    assert new.hash_block_size and not old.hash_block_size
    assert old.touch_per_group and not new.touch_per_group
    assert new.unhashed_free_to_front and not old.unhashed_free_to_front


def test_missing_source_says_how_to_fetch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(v1.SOURCE_ENV, raising=False)
    with pytest.raises(UpstreamSourceMissing, match="fetch"):
        v1.load_vllm_v1(version="0.11.0")


def test_fetch_runs_pip_download(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def runner(args: list[str], *, check: bool) -> object:
        calls.append(args)
        (tmp_path / "vllm-0.11.0-cp38-abi3-x.whl").write_bytes(b"")
        return None

    assert v1.fetch("0.11.0", tmp_path, runner).name.startswith("vllm-0.11.0-")
    assert calls and "vllm==0.11.0" in calls[0] and "--no-deps" in calls[0]
    assert v1.fetch("0.11.0", tmp_path, runner) and len(calls) == 1  # cached: no second run


def test_tree_without_v1_core_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UpstreamSourceInvalid, match="missing"):
        v1.load_vllm_v1(tmp_path)


def test_v0_registration_survives_a_v1_load(mods: v1.V1Modules) -> None:
    from properties.families.v0 import upstream as v0
    if not v0.cached_vllm_wheel().is_file():
        pytest.skip(f"vllm-block wheel not cached: `{v0.FETCH_COMMAND}`")
    v0.load_vllm_v0()
    before = {n: m for n, m in sys.modules.items() if n == "vllm" or n.startswith("vllm.")}
    v1.load_vllm_v1(version=mods.version.split()[1], patches=[
        ("v1.core.block_pool", "def get_usage(self)", "def get_usage(self, _v0_test=0)")])
    after = {n: m for n, m in sys.modules.items() if n == "vllm" or n.startswith("vllm.")}
    assert after == before
