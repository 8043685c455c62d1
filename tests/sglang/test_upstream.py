"""The SGLang loader: upstream's modules from the wheel, isolated, memoised, typed errors."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from properties.core.sources import UpstreamSourceInvalid, UpstreamSourceMissing
from properties.families.sglang import stand_ins
from properties.families.sglang import upstream as sgl

RELEASES = [v for v in sgl.SUPPORTED_VERSIONS if sgl.unavailable_reason(v) is None]
needs_wheel = pytest.mark.skipif(not RELEASES, reason=str(sgl.unavailable_reason()))


@pytest.fixture(params=RELEASES or [pytest.param(None, marks=needs_wheel)])
def mods(request: pytest.FixtureRequest) -> sgl.SGLangModules:
    return sgl.load_sglang(version=request.param)


def test_loads_from_the_wheel_and_restores_sys_modules(mods: sgl.SGLangModules) -> None:
    assert not [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]
    assert mods.version in sgl.SUPPORTED_VERSIONS
    assert ".whl/sglang/srt/mem_cache/radix_cache.py" in (mods.radix_cache.__file__ or "")
    assert "sglang.srt.mem_cache.memory_pool" in mods.stubbed
    assert sgl.load_sglang(version=mods.version) is mods  # memoised
    with mods.activated():
        assert sys.modules["sglang.srt.mem_cache.radix_cache"] is mods.radix_cache
    assert "sglang.srt.mem_cache.radix_cache" not in sys.modules


@needs_wheel
def test_a_fresh_interpreter_loads_without_installing_sglang() -> None:
    script = ("import sys, importlib.util; from properties.families.sglang import upstream as u;"
              f" m = u.load_sglang(version={RELEASES[0]!r});"
              " sys.exit(importlib.util.find_spec('sglang') is not None or"
              " any(n.startswith('sglang') for n in sys.modules))")
    assert subprocess.run([sys.executable, "-c", script], check=False).returncode == 0


def test_every_class_and_core_runs(mods: sgl.SGLangModules) -> None:
    rows = {what: status for version, what, status, _ in sgl.measure((mods.version,))}
    for what in ("load", "TokenToKVPoolAllocator", "PagedTokenToKVPoolAllocator", "RadixCache",
                 "UnifiedRadixCache:python"):
        assert rows[what] == "ok", (what, rows[what])
    if mods.version == sgl.DEFAULT_VERSION:
        assert mods.rust_core and rows["UnifiedRadixCache:rust"] == "ok"
    else:
        assert mods.rust_core is None
        with pytest.raises(sgl.UpstreamCoreUnavailable, match="no rust_tree_core"):
            mods.new_unified(mods.new_allocator(8), core="rust")


def test_placeholders_refuse_to_be_used(mods: sgl.SGLangModules) -> None:
    pool = mods.modules["sglang.srt.mem_cache.memory_pool"]
    with pytest.raises(stand_ins.StandInUsed, match="MHATokenToKVPool"):
        pool.MHATokenToKVPool(1, 2)
    with pytest.raises(AttributeError, match="stand_ins"):
        _ = pool.NoSuchPool


def test_missing_wheel_says_how_to_fetch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(UpstreamSourceMissing, match=r"fetch sglang --version 0\.5\.18"):
        sgl.load_sglang(version="0.5.18")


def test_fetch_runs_pip_download(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def runner(args: list[str], *, check: bool) -> object:
        calls.append(args)
        (tmp_path / "sglang-0.5.23-cp311-cp311-x.whl").write_bytes(b"")
        return None

    assert sgl.fetch("0.5.23", tmp_path, runner).name.startswith("sglang-0.5.23-")
    assert calls and "sglang==0.5.23" in calls[0] and "--no-deps" in calls[0]
    assert sgl.fetch("0.5.23", tmp_path, runner) and len(calls) == 1


def test_a_wheel_without_the_caches_is_refused(tmp_path: Path) -> None:
    wheel = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("sglang/srt/mem_cache/__init__.py", "")
    with pytest.raises(UpstreamSourceInvalid, match="radix_cache"):
        sgl.load_sglang(wheel, version="9.9.9")
    not_a_wheel = tmp_path / "x.whl"
    not_a_wheel.write_text("no zip")
    with pytest.raises(UpstreamSourceInvalid, match="not a readable wheel"):
        sgl.load_sglang(not_a_wheel, version="9.9.9")
