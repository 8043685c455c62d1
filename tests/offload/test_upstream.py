"""The offload loader: real upstream modules, isolated, version from the wheel, API drift
detected, typed errors naming what is missing."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from properties.core.sources import UpstreamSourceMissing
from properties.families.offload import upstream as up

EXPECTED = {
    "0.34.0": dict(generation="cpu-manager", touch=False, request_access_hook=True,
                   threshold_once_per_request=True),
    "0.33.0": dict(generation="cpu-manager", touch=True, request_access_hook=False,
                   threshold_once_per_request=False),
    "0.11.0": dict(generation="lru-backend", touch=True, per_key_lookup=False,
                   req_context=False, reset_cache=False),
}


def _mods(version: str) -> up.OffloadModules:
    if up.cached_wheel(version) is None:
        pytest.skip(f"no vllm {version} wheel cached: run `{up.FETCH_COMMAND} --version "
                    f"{version}`")
    return up.load_vllm_offload(version=version)


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_version_and_capabilities(version: str) -> None:
    before = {n for n in sys.modules if n == "vllm" or n.startswith("vllm.")}  # other loaders'
    mods = _mods(version)
    assert mods.version == f"vllm {version}"
    caps = up.capabilities(mods)
    for name, value in EXPECTED[version].items():
        assert getattr(caps, name) == value, name
    if caps.generation == "cpu-manager":
        assert caps.policies == ("arc", "lru") and caps.per_key_lookup and caps.req_context
        assert "torch" in mods.stubbed and "vllm.v1.kv_hints" in mods.stubbed
    assert up.load_vllm_offload(version=version) is mods  # memoised
    assert not [n for n in sys.modules if (n == "vllm" or n.startswith("vllm."))
                and n not in before]  # the offload loader leaves none of its own


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_policy_factory_bound_to_loaded_classes(policy: str) -> None:
    mods = _mods("0.34.0")
    manager = up.new_manager(mods, 3, cache_policy=policy)
    module = mods.modules[f"v1.kv_offload.cpu.policies.{policy}"]
    assert type(manager._policy).__module__ == module.__name__
    assert type(manager._policy) in vars(module).values()


def test_loads_without_torch_in_a_fresh_interpreter() -> None:
    _mods("0.34.0")
    script = ("import sys; from properties.families.offload import upstream as up; "
              "m = up.load_vllm_offload(version='0.34.0'); up.new_manager(m, 2, "
              "cache_policy='arc'); sys.exit('torch' in sys.modules or any(n == 'vllm' or "
              "n.startswith('vllm.') for n in sys.modules))")
    assert subprocess.run([sys.executable, "-c", script], check=False).returncode == 0


def _wheel(tmp_path: Path, members: dict[str, str]) -> Path:
    path = tmp_path / "vllm-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("vllm-9.9.9.dist-info/METADATA", "Name: vllm\nVersion: 9.9.9\n")
        for name, text in members.items():
            archive.writestr(name, text)
    return path


def test_release_without_offload_is_a_typed_error(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"vllm/__init__.py": ""})
    with pytest.raises(up.OffloadUnsupported, match=r"vllm 9\.9\.9.*no CPU offload manager"):
        up.load_vllm_offload(wheel)


def test_incomplete_generation_names_missing_modules(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"vllm/v1/kv_offload/cpu/manager.py": ""})
    with pytest.raises(up.OffloadUnsupported, match=r"missing: .*vllm\.v1\.kv_offload\.base"):
        up.load_vllm_offload(wheel)


def test_missing_wheel_names_the_fetch_command(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(up.SOURCE_ENV, raising=False)
    with pytest.raises(UpstreamSourceMissing, match=r"fetch --version 0\.33\.0"):
        up.load_vllm_offload(version="0.33.0")


def test_lru_backend_rejects_what_it_lacks() -> None:
    mods = _mods("0.11.0")
    with pytest.raises(up.OffloadUnsupported):
        up.new_manager(mods, 2, cache_policy="arc")
