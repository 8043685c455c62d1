"""``properties.families.v0.upstream``: real upstream allocators loaded without their engines.

Two halves: the vLLM v0 code from the vllm-block wheel (skipped, with the fetch
command, when the wheel is not cached), exercised through its real
``CpuGpuBlockAllocator`` and ``BlockTable``; and synthetic source trees built
here, which cover the tree/zip paths, the engine stubs, registration versus
isolation, and every error path without the wheel.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import os
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from properties.families.v0 import upstream
from properties.families.v0.upstream import (
    APHRODITE_FETCH_COMMAND,
    APHRODITE_REQUIREMENT,
    APHRODITE_SOURCE_ENV,
    APHRODITE_WHEEL,
    FETCH_COMMAND,
    VLLM_BLOCK_REQUIREMENT,
    VLLM_BLOCK_WHEEL,
    VLLM_SOURCE_ENV,
    UpstreamError,
    UpstreamModules,
    UpstreamSourceInvalid,
    UpstreamSourceMissing,
    aphrodite_allocator,
    cache_dir,
    fetch_aphrodite,
    fetch_vllm_block,
    load_aphrodite,
    load_vllm_v0,
    vllm_v0_allocator,
)

REPO_ROOT = Path(upstream.__file__).resolve().parents[1]
TOPS = ("vllm", "aphrodite")


# --------------------------------------------------------------------------- #
# Fixtures
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def vllm() -> UpstreamModules:
    """vLLM v0 modules from the default lookup (env var, installed package, cached wheel)."""
    try:
        return load_vllm_v0()
    except UpstreamSourceMissing:
        pytest.skip(f"vllm-block wheel not cached; fetch it with `{FETCH_COMMAND}`")


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Run as if no upstream names were ever loaded; restore the process state afterwards."""
    for env in (VLLM_SOURCE_ENV, APHRODITE_SOURCE_ENV):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    saved = {n: sys.modules.pop(n) for n in list(sys.modules) if n.split(".")[0] in TOPS}
    saved_loaded = dict(upstream._LOADED)
    upstream._LOADED.clear()
    for top in TOPS:
        if importlib.util.find_spec(top) is not None:
            sys.modules.update(saved)
            upstream._LOADED.update(saved_loaded)
            pytest.skip(f"a real {top} package is installed")
    try:
        yield
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] in TOPS]:
            del sys.modules[name]
        sys.modules.update(saved)
        upstream._LOADED.clear()
        upstream._LOADED.update(saved_loaded)


def _names(top: str) -> set[str]:
    return {n for n in sys.modules if n == top or n.startswith(top + ".")}


# --------------------------------------------------------------------------- #
# Synthetic source trees (our own tiny modules in the upstream layout)
# --------------------------------------------------------------------------- #

_FAKE_BLOCK_MODULES = {
    "interfaces": """
        from {top}.{utils} import Device

        class BlockAllocator:
            class NoFreeBlocksError(ValueError):
                pass
    """,
    "common": """
        from {top}.{block}.interfaces import BlockAllocator

        def chain_length(n):
            return n
    """,
    "naive_block": """
        from {top}.{block}.common import chain_length
        from {top}.{block}.interfaces import BlockAllocator, Device
    """,
    "prefix_caching_block": """
        from {top}.{block}.naive_block import BlockAllocator
        from {top}.{evictor} import make_evictor
        from {top}.{logger} import init_logger
        from {top}.{sequence} import Sequence

        logger = init_logger(__name__)

        def tracked_tokens(seq: Sequence) -> int:
            return len(seq.get_token_ids())
    """,
    "cpu_gpu_block_allocator": """
        from {top}.{block}.prefix_caching_block import make_evictor
        from {top}.{platforms} import current_platform
        from {top}.{utils} import Device

        class CpuGpuBlockAllocator:
            def __init__(self, args):
                self.args = args

            @staticmethod
            def create(allocator_type, num_gpu_blocks, num_cpu_blocks, block_size):
                if allocator_type not in ("naive", "prefix_caching"):
                    raise ValueError(allocator_type)
                reserved = 1 if current_platform.is_hpu() else 0
                return CpuGpuBlockAllocator(
                    (allocator_type, num_gpu_blocks - reserved, num_cpu_blocks, block_size)
                )
    """,
    "block_table": """
        from {top}.{utils} import cdiv, chunk_list

        def layout(tokens, block_size):
            return cdiv(len(tokens), block_size), list(chunk_list(tokens, block_size))
    """,
}

_LAYOUTS: dict[str, dict[str, str]] = {
    "vllm": {
        "top": "vllm",
        "block": "core.block",
        "evictor": "core.evictor",
        "utils": "utils",
        "logger": "logger",
        "platforms": "platforms",
        "sequence": "sequence",
    },
    "aphrodite": {
        "top": "aphrodite",
        "block": "processing.block",
        "evictor": "processing.evictor_v2",
        "utils": "common.utils",
        "logger": "common.logger",
        "platforms": "platforms",
        "sequence": "common.sequence",
    },
}


def _fake_files(flavour: str, package_dir: str | None = None) -> dict[str, str]:
    """Relative path -> source text of a tiny tree in ``flavour``'s upstream layout."""
    layout = _LAYOUTS[flavour]
    pkg = package_dir or layout["top"]
    block_dir = layout["block"].replace(".", "/")
    files = {
        f"{pkg}/{block_dir}/{name}.py": textwrap.dedent(text).format(**layout)
        for name, text in _FAKE_BLOCK_MODULES.items()
    }
    files[f"{pkg}/{layout['evictor'].replace('.', '/')}.py"] = textwrap.dedent(
        """
        import enum

        class EvictionPolicy(enum.Enum):
            LRU = enum.auto()

        def make_evictor(policy):
            if policy is not EvictionPolicy.LRU:
                raise ValueError(policy)
            return "lru"
        """
    )
    return files


def _write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _fake_tree(
    root: Path, flavour: str = "vllm", overrides: dict[str, str | None] | None = None
) -> Path:
    """Write a fake tree; ``overrides`` maps a relative path to new text, or None to drop it."""
    files = _fake_files(flavour)
    for rel, text in (overrides or {}).items():
        if text is None:
            del files[rel]
        else:
            files[rel] = text
    return _write_tree(root, files)


# --------------------------------------------------------------------------- #
# The real vLLM v0 code from the wheel
# --------------------------------------------------------------------------- #


def test_wheel_modules_carry_upstream_names_and_our_stubs(vllm: UpstreamModules) -> None:
    assert vllm.prefix_caching_block.__name__ == "vllm.core.block.prefix_caching_block"
    assert vllm.cpu_gpu_block_allocator.__name__ == "vllm.core.block.cpu_gpu_block_allocator"
    assert vllm.evictor.__name__ in ("vllm.core.evictor", "vllm.core.evictor_v2")
    device = vllm.utils.Device
    assert [(d.name, d.value) for d in device] == [("GPU", 1), ("CPU", 2)]
    # Class identity: the block modules use the very Device the stub exports.
    assert vllm.interfaces.Device is device
    assert vllm.block_table.Device is device
    assert issubclass(vllm.interfaces.BlockAllocator.NoFreeBlocksError, ValueError)
    if vllm.stubbed:  # empty only when a real vllm is installed
        assert set(vllm.stubbed) == {"vllm.utils", "vllm.logger", "vllm.platforms", "vllm.sequence"}
        assert vllm.version == "vllm-block 0.1.0"
        assert vllm.block_utils is not None
        assert vllm.block_utils.__name__ == "vllm.core.block.utils"


def test_loading_twice_returns_the_same_modules(vllm: UpstreamModules) -> None:
    again = load_vllm_v0()
    assert again is vllm
    if vllm.registered:
        assert sys.modules["vllm.core.block.prefix_caching_block"] is vllm.prefix_caching_block
        assert sys.modules["vllm.utils"] is vllm.utils


@pytest.mark.parametrize("allocator_type", ["naive", "prefix_caching"])
def test_factory_creates_the_upstream_cpu_gpu_allocator(
    vllm: UpstreamModules, allocator_type: str
) -> None:
    device = vllm.utils.Device
    alloc = vllm_v0_allocator(allocator_type, 6, 3, 4)
    assert isinstance(alloc, vllm.cpu_gpu_block_allocator.CpuGpuBlockAllocator)
    assert isinstance(alloc, vllm.interfaces.DeviceAwareBlockAllocator)
    assert alloc.get_num_free_blocks(device.GPU) == 6
    assert alloc.get_num_free_blocks(device.CPU) == 3
    assert alloc.all_block_ids == frozenset(range(9))
    with pytest.raises(ValueError):
        vllm_v0_allocator("lru", 1, 1, 1)


@pytest.mark.parametrize("allocator_type", ["naive", "prefix_caching"])
@pytest.mark.parametrize("device_name", ["GPU", "CPU"])
def test_mutable_and_immutable_blocks_on_each_device(
    vllm: UpstreamModules, allocator_type: str, device_name: str
) -> None:
    device = vllm.utils.Device[device_name]
    other = vllm.utils.Device.CPU if device_name == "GPU" else vllm.utils.Device.GPU
    alloc = vllm_v0_allocator(allocator_type, 4, 4, 2)
    ids = range(0, 4) if device_name == "GPU" else range(4, 8)

    first = alloc.allocate_immutable_block(None, [1, 2], device)
    second = alloc.allocate_mutable_block(first, device)
    second.append_token_ids([3])
    assert first.block_id in ids and second.block_id in ids
    assert first.token_ids == [1, 2] and second.token_ids == [3]
    assert second.prev_block is first
    assert alloc.get_num_free_blocks(device) == 2
    assert alloc.get_num_free_blocks(other) == 4

    twin = alloc.allocate_immutable_block(None, [1, 2], device)
    if allocator_type == "prefix_caching":
        assert twin.block_id == first.block_id  # content hit, no new id
        assert alloc.get_num_free_blocks(device) == 2
    else:
        assert twin.block_id != first.block_id
        assert alloc.get_num_free_blocks(device) == 1

    for block in (twin, second, first):
        alloc.free(block)
        assert block.block_id is None
    assert alloc.get_num_free_blocks(device) == 4
    assert alloc.get_num_free_blocks(other) == 4


def test_exhaustion_raises_the_upstream_error_class(vllm: UpstreamModules) -> None:
    device = vllm.utils.Device
    alloc = vllm_v0_allocator("prefix_caching", 2, 0, 2)
    held = [alloc.allocate_mutable_block(None, device.GPU) for _ in range(2)]
    with pytest.raises(vllm.interfaces.BlockAllocator.NoFreeBlocksError):
        alloc.allocate_mutable_block(None, device.GPU)
    alloc.free(held[0])
    assert alloc.allocate_mutable_block(None, device.GPU).block_id == 0


def test_fork_shares_ids_and_frees_only_with_the_last_holder(vllm: UpstreamModules) -> None:
    device = vllm.utils.Device
    alloc = vllm_v0_allocator("prefix_caching", 8, 0, 2)
    b0 = alloc.allocate_immutable_block(None, [1, 2], device.GPU)
    b1 = alloc.allocate_immutable_block(b0, [3, 4], device.GPU)
    b2 = alloc.allocate_mutable_block(b1, device.GPU)
    b2.append_token_ids([5])
    assert alloc.get_num_free_blocks(device.GPU) == 5

    forked = alloc.fork(b2)
    assert [b.block_id for b in forked] == [b0.block_id, b1.block_id, b2.block_id]
    assert [b.token_ids for b in forked] == [[1, 2], [3, 4], [5]]
    assert forked[2].prev_block is forked[1]
    assert alloc.get_num_free_blocks(device.GPU) == 5

    for block in (b2, b1, b0):
        alloc.free(block)
    assert alloc.get_num_free_blocks(device.GPU) == 5  # the fork still holds every id
    assert [b.block_id for b in forked] == [0, 1, 2]
    for block in reversed(forked):
        alloc.free(block)
    assert alloc.get_num_free_blocks(device.GPU) == 8


def test_swap_round_trip_maps_ids_across_devices(vllm: UpstreamModules) -> None:
    device = vllm.utils.Device
    gpu, cpu = 8, 8
    alloc = vllm_v0_allocator("prefix_caching", gpu, cpu, 4)
    b0 = alloc.allocate_immutable_block(None, [0, 1, 2, 3], device.GPU)
    b1 = alloc.allocate_immutable_block(b0, [4, 5, 6, 7], device.GPU)
    b2 = alloc.allocate_mutable_block(b1, device.GPU)
    b2.append_token_ids([8, 9])
    blocks = [b0, b1, b2]
    gpu_ids = [b.block_id for b in blocks]

    out = alloc.swap(blocks, device.GPU, device.CPU)
    assert list(out) == gpu_ids
    cpu_ids = [b.block_id for b in blocks]
    assert list(out.values()) == cpu_ids
    assert all(gpu <= i < gpu + cpu for i in cpu_ids)
    assert [b.token_ids for b in blocks] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert alloc.get_num_free_blocks(device.GPU) == gpu  # cached pair sits in the evictor
    assert alloc.get_num_free_blocks(device.CPU) == cpu - 3
    assert [alloc.get_physical_block_id(device.CPU, i) for i in cpu_ids] == [
        i - gpu for i in cpu_ids
    ]

    back = alloc.swap(blocks, device.CPU, device.GPU)
    assert list(back) == cpu_ids
    # Both full blocks are still cached on the GPU, so they come back to their old ids.
    assert back[cpu_ids[0]] == gpu_ids[0] and back[cpu_ids[1]] == gpu_ids[1]
    assert alloc.get_num_free_blocks(device.CPU) == cpu
    assert alloc.get_num_free_blocks(device.GPU) == gpu - 3
    assert alloc.get_prefix_cache_hit_rate(device.GPU) > 0
    assert alloc.get_and_reset_swaps() == [*out.items(), *back.items()]
    assert alloc.get_and_reset_swaps() == []


def test_block_table_allocate_append_fork_free_round_trip(vllm: UpstreamModules) -> None:
    device = vllm.utils.Device
    block_size, total = 4, 16
    alloc = vllm_v0_allocator("prefix_caching", total, 0, block_size)
    table = vllm.block_table.BlockTable(block_size=block_size, block_allocator=alloc)
    table.allocate(list(range(10)))
    assert len(table.blocks) == 3 and table.num_full_slots == 10
    assert alloc.get_num_free_blocks(device.GPU) == total - 3

    table.append_token_ids([10, 11, 12])
    assert table._get_all_token_ids() == list(range(13))
    assert len(table.physical_block_ids) == 4
    assert alloc.get_num_free_blocks(device.GPU) == total - 4

    fork = table.fork()
    assert fork.physical_block_ids == table.physical_block_ids
    assert fork._get_all_token_ids() == list(range(13))
    assert alloc.get_num_free_blocks(device.GPU) == total - 4

    alloc.clear_copy_on_writes()
    fork.append_token_ids([99])  # the shared partial last block must be copied
    assert fork.physical_block_ids[:3] == table.physical_block_ids[:3]
    assert fork.physical_block_ids[3] != table.physical_block_ids[3]
    assert alloc.clear_copy_on_writes() == [
        (table.physical_block_ids[3], fork.physical_block_ids[3])
    ]
    assert table._get_all_token_ids() == list(range(13))
    assert fork._get_all_token_ids() == [*range(13), 99]

    # A second table with the same prompt shares the full blocks through the cache.
    other = vllm.block_table.BlockTable(block_size=block_size, block_allocator=alloc)
    other.allocate(list(range(9)))
    assert other.physical_block_ids[:2] == table.physical_block_ids[:2]

    for t in (table, fork, other):
        t.free()
    assert alloc.get_num_free_blocks(device.GPU) == total


def test_find_cached_blocks_prefix_follows_computed_and_eviction(vllm: UpstreamModules) -> None:
    device = vllm.utils.Device
    block_size, num_blocks = 4, 8
    alloc = vllm_v0_allocator("prefix_caching", num_blocks, 0, block_size)

    def chain(first_token: int, n: int) -> list[Any]:
        blocks: list[Any] = []
        prev = None
        for i in range(n):
            tokens = list(range(first_token + i * block_size, first_token + (i + 1) * block_size))
            prev = alloc.allocate_immutable_block(prev, tokens, device.GPU)
            blocks.append(prev)
        return blocks

    old = chain(0, 8)
    hashes = [b.content_hash for b in old]
    assert all(isinstance(h, int) for h in hashes)
    assert alloc.find_cached_blocks_prefix(hashes) == []  # cached but not yet computed
    alloc.mark_blocks_as_computed([])
    assert alloc.find_cached_blocks_prefix(hashes) == hashes
    for block in reversed(old):
        alloc.free(block)
    assert alloc.find_cached_blocks_prefix(hashes) == hashes  # evictable still counts

    new = chain(1000, 4)  # evicts four of the old chain's blocks
    alloc.mark_blocks_as_computed([])
    assert alloc.find_cached_blocks_prefix([b.content_hash for b in new]) == [
        b.content_hash for b in new
    ]
    assert len(alloc.find_cached_blocks_prefix(hashes)) == 4


def test_evictor_picks_oldest_then_deepest(vllm: UpstreamModules) -> None:
    evictor = vllm.evictor.make_evictor(vllm.evictor.EvictionPolicy.LRU)
    evictor.add(1, 101, 16, 5.0)
    evictor.add(2, 102, 32, 5.0)
    evictor.add(3, 103, 48, 9.0)
    assert evictor.num_blocks == 3 and 2 in evictor
    assert evictor.evict() == (2, 102)
    evictor.update(1, 10.0)
    assert evictor.evict() == (3, 103)
    with pytest.raises(ValueError):
        evictor.remove(3)


def test_fresh_process_registers_names_without_importing_torch() -> None:
    """In a clean interpreter: names registered, idempotent, no engine, no torch."""
    script = """
        import importlib, sys
        from properties.families.v0.upstream import UpstreamSourceMissing, load_vllm_v0
        try:
            mods = load_vllm_v0()
        except UpstreamSourceMissing:
            print("MISSING"); raise SystemExit(0)
        if not mods.stubbed:
            print("REAL"); raise SystemExit(0)
        import vllm.core.block.prefix_caching_block as pcb
        import vllm
        assert pcb is mods.prefix_caching_block
        assert vllm.core.block.block_table is mods.block_table
        assert load_vllm_v0() is mods
        assert "torch" not in sys.modules, "torch was imported"
        try:
            importlib.import_module("vllm.engine")
        except ModuleNotFoundError:
            pass
        else:
            raise AssertionError("the engine must not be importable")
        print("OK", mods.registered)
    """
    out = _run_child(script)
    if out == "MISSING":
        pytest.skip(f"vllm-block wheel not cached; fetch it with `{FETCH_COMMAND}`")
    if out == "REAL":
        pytest.skip("a real vllm is installed")
    assert out == "OK True"


def test_a_real_vllm_package_is_left_alone(vllm: UpstreamModules, tmp_path: Path) -> None:
    """With a (fake) real vllm on the path, the wheel loads isolated and vllm stays intact."""
    if not vllm.stubbed:
        pytest.skip("a real vllm is installed")
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("REAL = 'yes'\n")
    script = """
        import sys
        import vllm
        from properties.families.v0.upstream import load_vllm_v0
        mods = load_vllm_v0()
        assert not mods.registered
        assert sys.modules["vllm"] is vllm and vllm.REAL == "yes"
        assert not [n for n in sys.modules if n.startswith("vllm.")], "leaked names"
        alloc = mods.cpu_gpu_block_allocator.CpuGpuBlockAllocator.create(
            "prefix_caching", 2, 1, 2)
        assert alloc.get_num_free_blocks(mods.utils.Device.CPU) == 1
        assert load_vllm_v0() is mods
        print("OK", mods.origin.endswith("vllm_block"))
    """
    assert _run_child(script, pythonpath=site) == "OK True"


def _run_child(script: str, pythonpath: Path | None = None) -> str:
    env = dict(os.environ)
    paths = [str(p) for p in (pythonpath, REPO_ROOT) if p is not None]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


# --------------------------------------------------------------------------- #
# Synthetic trees: layout, stubs, registration, isolation
# --------------------------------------------------------------------------- #


def test_tree_loads_under_upstream_names_with_working_stubs(fresh: None, tmp_path: Path) -> None:
    root = _fake_tree(tmp_path / "src")
    mods = load_vllm_v0(root)
    assert mods.registered
    assert mods.origin == str(root / "vllm")
    assert mods.version == "unknown"
    assert mods.block_utils is None
    assert mods.evictor.__name__ == "vllm.core.evictor"
    assert mods.stubbed == ("vllm.logger", "vllm.platforms", "vllm.sequence", "vllm.utils")
    assert mods.block_table.__file__ == str(root / "vllm/core/block/block_table.py")
    assert sys.modules["vllm.core.block.interfaces"] is mods.interfaces

    device = mods.utils.Device
    assert [(d.name, d.value) for d in device] == [("GPU", 1), ("CPU", 2)]
    assert device.__module__ == "vllm.utils" and device.__qualname__ == "Device"
    assert mods.naive_block.Device is device
    assert [mods.utils.cdiv(a, 4) for a in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    assert mods.block_table.layout(list(range(5)), 2) == (3, [[0, 1], [2, 3], [4]])
    logger = mods.prefix_caching_block.logger
    assert isinstance(logger, logging.Logger)
    assert logger.name == "vllm.core.block.prefix_caching_block"
    assert mods.prefix_caching_block.Sequence.__module__ == "vllm.sequence"
    platform = sys.modules["vllm.platforms"].current_platform
    assert not platform.is_hpu() and platform.is_cpu()


def test_tree_accepts_the_package_dir_and_a_vllm_block_layout(fresh: None, tmp_path: Path) -> None:
    files = _fake_files("vllm", package_dir="vllm_block")
    files["vllm_block/core/block/utils.py"] = "from vllm.utils import STR_NOT_IMPL_ENC_DEC_SWA\n"
    files["vllm_block-7.1.dist-info/METADATA"] = "Name: vllm-block\nVersion: 7.1\n"
    root = _write_tree(tmp_path / "wheel", files)
    mods = load_vllm_v0(root)
    assert mods.version == "vllm-block 7.1"
    assert mods.block_utils is not None
    assert "encoder/decoder" in mods.block_utils.STR_NOT_IMPL_ENC_DEC_SWA
    # Pointing at the package directory itself is the same source: same modules.
    assert load_vllm_v0(root / "vllm_block") is mods
    assert load_vllm_v0(str(root)) is mods


def test_tree_without_dist_info_reads_the_package_version(fresh: None, tmp_path: Path) -> None:
    """A source checkout or an unpacked sdist has no dist-info: the version is the package's
    own, ``_version.py`` as setuptools_scm writes it (``version.py`` only imports it), parsed,
    never imported."""
    files = _fake_files("vllm")
    files["vllm/_version.py"] = ("version: str\n__version__: str\n"
                                 "__version__ = version = '0.8.5'\n")
    files["vllm/version.py"] = "from ._version import __version__\nraise RuntimeError\n"
    assert load_vllm_v0(_write_tree(tmp_path / "sdist", files)).version == "vllm 0.8.5"


def test_zip_with_nested_prefix_and_dist_info(fresh: None, tmp_path: Path) -> None:
    archive = tmp_path / "fake.whl"
    with zipfile.ZipFile(archive, "w") as zf:
        for rel, text in _fake_files("vllm").items():
            zf.writestr(f"pkg/{rel}", text)
        zf.writestr("pkg/fake_vllm-9.9.dist-info/METADATA", "Name: fake-vllm\nVersion: 9.9\n")
        zf.writestr("pkg/vllm/core/block/README.txt", "not python")
    mods = load_vllm_v0(archive)
    assert mods.version == "fake-vllm 9.9"
    assert mods.origin == f"{archive}/pkg/vllm"
    assert mods.interfaces.__file__ == f"{archive}/pkg/vllm/core/block/interfaces.py"
    # Source lines come from the loader, so tracebacks into zip members show code.
    loader = mods.interfaces.__loader__
    assert isinstance(loader, importlib.abc.InspectLoader)
    assert "class BlockAllocator" in (loader.get_source("vllm.core.block.interfaces") or "")
    assert load_vllm_v0(archive) is mods


def test_second_source_loads_isolated_and_keeps_the_first_registered(
    fresh: None, tmp_path: Path
) -> None:
    first = load_vllm_v0(_fake_tree(tmp_path / "one"))
    before = {n: sys.modules[n] for n in _names("vllm")}
    second = load_vllm_v0(_fake_tree(tmp_path / "two"))
    assert first.registered and not second.registered
    assert second.interfaces is not first.interfaces
    assert second.utils.Device is not first.utils.Device
    assert {n: sys.modules[n] for n in _names("vllm")} == before
    # The isolated modules still resolve their own imports.
    assert second.naive_block.Device is second.utils.Device


def test_env_var_source_and_factories(
    fresh: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VLLM_SOURCE_ENV, str(_fake_tree(tmp_path / "v")))
    monkeypatch.setenv(APHRODITE_SOURCE_ENV, str(_fake_tree(tmp_path / "a", "aphrodite")))
    assert vllm_v0_allocator("naive", 5, 2, 16).args == ("naive", 5, 2, 16)
    created = aphrodite_allocator("prefix_caching", 3, 0, 8)
    assert created.args == ("prefix_caching", 3, 0, 8)
    assert type(created).__module__ == "aphrodite.processing.block.cpu_gpu_block_allocator"
    with pytest.raises(ValueError):
        vllm_v0_allocator("lru", 1, 1, 1)


def test_aphrodite_layout_uses_its_own_engine_names(fresh: None, tmp_path: Path) -> None:
    mods = load_aphrodite(_fake_tree(tmp_path, "aphrodite"))
    assert mods.registered
    assert mods.evictor.__name__ == "aphrodite.processing.evictor_v2"
    assert mods.utils.__name__ == "aphrodite.common.utils"
    assert set(mods.stubbed) == {
        "aphrodite.common.logger",
        "aphrodite.common.sequence",
        "aphrodite.common.utils",
        "aphrodite.platforms",
    }
    assert mods.interfaces.Device is mods.utils.Device
    assert not _names("vllm")


def test_installed_real_package_is_used_as_is(
    fresh: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _fake_tree(tmp_path / "site")
    # A real package provides its own engine modules; give the fake ones plain files.
    (site / "vllm" / "__init__.py").write_text("")
    (site / "vllm" / "utils.py").write_text(
        "import enum\nclass Device(enum.Enum):\n    GPU = enum.auto()\n    CPU = enum.auto()\n"
        "def cdiv(a, b):\n    return -(a // -b)\ndef chunk_list(x, n):\n"
        "    return [x[i:i + n] for i in range(0, len(x), n)]\n"
    )
    (site / "vllm" / "logger.py").write_text("import logging\ninit_logger = logging.getLogger\n")
    (site / "vllm" / "platforms.py").write_text(
        "class _P:\n    def is_hpu(self):\n        return True\ncurrent_platform = _P()\n"
    )
    (site / "vllm" / "sequence.py").write_text("class Sequence: pass\n")
    monkeypatch.syspath_prepend(str(site))
    mods = load_vllm_v0()
    assert mods.stubbed == ()
    assert mods.registered
    assert mods.origin == str(site / "vllm")
    assert mods.utils.__file__ == str(site / "vllm" / "utils.py")
    # The real platform says HPU, so the (fake) create reserves one block.
    assert vllm_v0_allocator("naive", 4, 1, 2).args == ("naive", 3, 1, 2)
    assert load_vllm_v0() is mods


# --------------------------------------------------------------------------- #
# Error paths
# --------------------------------------------------------------------------- #


def test_missing_source_names_the_fetch_command(
    fresh: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The test extra installs vllm-block; hide that distribution so no source exists at all.
    installed = upstream._installed_package_dir
    monkeypatch.setattr(upstream, "_installed_package_dir",
                        lambda top: None if top == "vllm_block" else installed(top))
    with pytest.raises(UpstreamSourceMissing) as info:
        load_vllm_v0()
    message = str(info.value)
    assert FETCH_COMMAND in message and VLLM_SOURCE_ENV in message
    assert str(tmp_path / "empty-cache" / "prefixcache" / VLLM_BLOCK_WHEEL) in message
    with pytest.raises(UpstreamSourceMissing, match=APHRODITE_SOURCE_ENV):
        load_aphrodite()
    assert isinstance(info.value, UpstreamError) and isinstance(info.value, ImportError)


def test_the_installed_vllm_block_distribution_is_the_default_source(fresh: None) -> None:
    """With no cached wheel and no environment variable, the ``vllm-block`` distribution the
    test extra installs is found (a fresh machine needs no ``fetch``)."""
    if importlib.util.find_spec("vllm_block") is None:
        pytest.skip("vllm-block is not installed (it is part of the test extra)")
    mods = load_vllm_v0()
    assert mods.version == "vllm-block 0.1.0"
    assert Path(mods.origin).name == "vllm_block" and mods.registered
    alloc = vllm_v0_allocator("prefix_caching", 2, 1, 2)
    assert alloc.get_num_free_blocks(mods.utils.Device.CPU) == 1


def test_cached_wheel_path_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "prefixcache"
    assert upstream.cached_vllm_wheel() == tmp_path / "prefixcache" / VLLM_BLOCK_WHEEL
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # ignored, per the XDG spec
    assert cache_dir() == Path.home() / ".cache" / "prefixcache"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "prefixcache"


@pytest.mark.parametrize("kind", ["nonexistent", "empty-dir", "not-a-zip", "zip-without-blocks"])
def test_bad_paths_raise_invalid(fresh: None, tmp_path: Path, kind: str) -> None:
    path = tmp_path / kind
    expected = {
        "nonexistent": "no such file",
        "empty-dir": "vllm/core/block/",
        "not-a-zip": "neither a source directory nor a zip",
        "zip-without-blocks": "archive holds no",
    }[kind]
    if kind == "empty-dir":
        path.mkdir()
    elif kind == "not-a-zip":
        path.write_text("plain text")
    elif kind == "zip-without-blocks":
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("vllm/core/scheduler.py", "")
    with pytest.raises(UpstreamSourceInvalid, match=expected):
        load_vllm_v0(path)
    assert not _names("vllm")


def test_missing_modules_are_all_listed(fresh: None, tmp_path: Path) -> None:
    root = _fake_tree(
        tmp_path,
        overrides={"vllm/core/block/block_table.py": None, "vllm/core/evictor.py": None},
    )
    with pytest.raises(UpstreamSourceInvalid) as info:
        load_vllm_v0(root)
    message = str(info.value)
    assert "vllm.core.block.block_table" in message
    assert "vllm.core.evictor" in message and "vllm.core.evictor_v2" in message
    assert "vllm.core.block.interfaces" not in message
    assert not _names("vllm")


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("from vllm.engine.arg_utils import EngineArgs", "vllm.engine"),
        ("from vllm.utils import make_async", "make_async"),
        ("raise RuntimeError('boom at import')", "boom at import"),
    ],
)
def test_unknown_engine_imports_fail_cleanly(
    fresh: None, tmp_path: Path, line: str, needle: str
) -> None:
    text = _fake_files("vllm")["vllm/core/block/block_table.py"] + line + "\n"
    root = _fake_tree(tmp_path, overrides={"vllm/core/block/block_table.py": text})
    with pytest.raises(UpstreamSourceInvalid, match=needle):
        load_vllm_v0(root)
    # Atomic: nothing half-registered, and a fixed tree then loads.
    assert not _names("vllm")
    (root / "vllm/core/block/block_table.py").write_text(
        _fake_files("vllm")["vllm/core/block/block_table.py"]
    )
    assert load_vllm_v0(root).registered


# --------------------------------------------------------------------------- #
# fetch and the command line
# --------------------------------------------------------------------------- #


class _FakePip:
    """Records the command; optionally creates the wheel pip would have written."""

    def __init__(self, creates: bool, fails: bool = False, wheel: str = VLLM_BLOCK_WHEEL) -> None:
        self.creates = creates
        self.fails = fails
        self.wheel = wheel
        self.calls: list[list[str]] = []

    def __call__(self, args: list[str], *, check: bool) -> object:
        self.calls.append(args)
        if self.fails:
            raise subprocess.CalledProcessError(2, args)
        if self.creates:
            dest = Path(args[args.index("--dest") + 1])
            (dest / self.wheel).write_bytes(b"wheel")
        return None


def test_fetch_runs_pip_download_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    pip = _FakePip(creates=True)
    wheel = fetch_vllm_block(runner=pip)
    assert wheel == tmp_path / "prefixcache" / VLLM_BLOCK_WHEEL and wheel.is_file()
    assert pip.calls == [
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--dest",
            str(tmp_path / "prefixcache"),
            VLLM_BLOCK_REQUIREMENT,
        ]
    ]
    assert fetch_vllm_block(runner=pip) == wheel  # already there: pip is not run again
    assert len(pip.calls) == 1


def test_fetch_aphrodite_downloads_the_binary_wheel_for_any_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The aphrodite-engine wheel is only read as a zip: its platform is named, so the same
    file comes on any host, and the missing-source message names this fetch."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    pip = _FakePip(creates=True, wheel=APHRODITE_WHEEL)
    wheel = fetch_aphrodite(runner=pip)
    assert wheel == upstream.cached_aphrodite_wheel() and wheel.is_file()
    assert pip.calls == [[sys.executable, "-m", "pip", "download", "--no-deps",
                          "--only-binary=:all:", "--platform", "manylinux1_x86_64",
                          "--dest", str(tmp_path / "prefixcache"), APHRODITE_REQUIREMENT]]
    assert fetch_aphrodite(runner=pip) == wheel and len(pip.calls) == 1
    with pytest.raises(UpstreamSourceMissing):
        fetch_aphrodite(tmp_path / "d", runner=_FakePip(creates=False))


def test_missing_aphrodite_names_its_fetch_command(fresh: None) -> None:
    with pytest.raises(UpstreamSourceMissing) as info:
        load_aphrodite()
    assert APHRODITE_FETCH_COMMAND in str(info.value)
    assert str(upstream.cached_aphrodite_wheel()) in str(info.value)


@pytest.mark.parametrize("fails", [False, True])
def test_fetch_reports_a_missing_wheel(tmp_path: Path, fails: bool) -> None:
    with pytest.raises(UpstreamSourceMissing):
        fetch_vllm_block(tmp_path / "d", runner=_FakePip(creates=False, fails=fails))


def test_cli_info_describes_a_source(
    fresh: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _fake_tree(tmp_path)
    assert upstream.main(["info", "vllm", "--source", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"origin:     {root / 'vllm'}" in out and "evictor:    vllm.core.evictor" in out
    assert upstream.main(["info", "aphrodite"]) == 1
    assert APHRODITE_SOURCE_ENV in capsys.readouterr().err


def test_modules_are_plain_module_objects(fresh: None, tmp_path: Path) -> None:
    mods = load_vllm_v0(_fake_tree(tmp_path))
    for name in ("interfaces", "common", "naive_block", "prefix_caching_block"):
        module = getattr(mods, name)
        assert isinstance(module, ModuleType)
        assert module.__spec__ is not None and module.__spec__.name == module.__name__
