"""``conformance/upstream_unit_tests.py`` (upstream's unit tests by import rename), without the
network: the rewrite on synthetic texts, the extraction and the sha256 check on a tiny sdist
built here (served by a local PEP 691 index), the strict xfails, and the stand-in sequence
against the bundled ``ComputedBlocksTracker``. The real run is a step of ``.ci/run``."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.prefix_caching_block import ComputedBlocksTracker
from prefixcache.utils import Device

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"


def _load(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, CONFORMANCE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


uut = _load("upstream_unit_tests")
stand_ins = _load("upstream_stand_ins")


# --- the rewrite -------------------------------------------------------------------------------

UPSTREAM_TEXT = '''\
"""Mentions vllm.core.block.naive_block in a docstring: left alone."""
import math
from typing import Optional

import pytest

from tests.core.utils import create_dummy_sequence
from vllm.core.block.prefix_caching_block import (ComputedBlocksTracker,
                                                  PrefixCachingBlock)
from vllm.sequence import Logprob
from vllm.utils import Device, cdiv


def test_x():
    from vllm.core.block.common import RefCounter  # a local import is renamed too
    # vllm.utils in a comment stays
    assert math and Optional and pytest and RefCounter
'''

EXPECTED_TEXT = '''\
"""Mentions vllm.core.block.naive_block in a docstring: left alone."""
import math
from typing import Optional

import pytest

from upstream_stand_ins import create_dummy_sequence
from prefixcache.prefix_caching_block import (ComputedBlocksTracker,
                                                  PrefixCachingBlock)
from upstream_stand_ins import Logprob
from prefixcache.utils import Device, cdiv


def test_x():
    from prefixcache.common import RefCounter  # a local import is renamed too
    # vllm.utils in a comment stays
    assert math and Optional and pytest and RefCounter
'''


def test_mapped_imports_are_renamed_and_nothing_else() -> None:
    text, names = uut.rewrite_imports(UPSTREAM_TEXT)
    assert text == EXPECTED_TEXT
    assert names == {
        "upstream_stand_ins": {"create_dummy_sequence", "Logprob"},
        "prefixcache.prefix_caching_block": {"ComputedBlocksTracker", "PrefixCachingBlock"},
        "prefixcache.utils": {"Device", "cdiv"},
        "prefixcache.common": {"RefCounter"},
    }


@pytest.mark.parametrize(
    "line",
    [
        "from vllm.core.block.block_manager import SelfAttnBlockSpaceManager",  # not mapped
        "from vllm import SamplingParams",
        "from tests.conftest import VllmRunner",
        "import vllm.utils",  # a mapped module, but its uses would still say vllm.utils
        "import torch",
        "from torch import nn",
        "from .conftest import x",
        "def f():\n    from vllm.engine.arg_utils import EngineArgs",
        "from unittest.mock import patch\nP = patch('vllm.core.block.common.RefCounter')",
    ],
)
def test_an_unknown_import_is_refused(line: str) -> None:
    with pytest.raises(uut.UnmappedImport):
        uut.rewrite_imports("import pytest\n" + line + "\n", "t.py")


def test_every_mapped_name_the_tests_import_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(CONFORMANCE))
    uut.check_names({
        "prefixcache.utils": {"Device", "cdiv", "chunk_list"},
        "upstream_stand_ins": {"Logprob", "create_dummy_sequence", "create_dummy_lora_sequence"},
        **{target: set() for target in uut.MAPPING.values()},
    })
    with pytest.raises(uut.MissingName, match="chunk_lists"):
        uut.check_names({"prefixcache.utils": {"chunk_lists"}})
    with pytest.raises(uut.MissingName):
        uut.check_names({"prefixcache.no_such_module": {"X"}})


# --- the sdist: extraction and the hash --------------------------------------------------------


def _sdist(path: Path, release: str = "9.9", skip: str = "") -> Path:
    top = f"vllm-{release}"
    files = {rel: f"# {rel}\n" for rel in uut.TEST_FILES if rel != skip}
    files["tests/__init__.py"] = ""
    files["tests/core/block/test_block_manager.py"] = "import vllm.engine\n"
    files["tests/core/block/e2e/test_correctness.py"] = "import vllm\n"
    with tarfile.open(path, "w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_extract_takes_exactly_the_listed_files(tmp_path: Path) -> None:
    sdist = _sdist(tmp_path / "s.tar.gz")
    work = tmp_path / "work"
    written = uut.extract(sdist, work)
    assert sorted(p.relative_to(work).as_posix() for p in written) == sorted(uut.TEST_FILES)
    found = sorted(p.relative_to(work).as_posix() for p in work.rglob("*.py"))
    assert found == sorted({*uut.TEST_FILES, *uut.PACKAGE_MARKERS})
    assert (work / "tests/core/__init__.py").read_text() == ""  # absent: created empty
    with pytest.raises(uut.SdistInvalid, match="test_common"):
        uut.extract(_sdist(tmp_path / "t.tar.gz", skip="tests/core/block/test_common.py"),
                    tmp_path / "w2")


def test_download_refuses_a_wrong_hash(tmp_path: Path) -> None:
    sdist = _sdist(tmp_path / "s.tar.gz")
    dest = tmp_path / "cache" / "vllm-9.9.tar.gz"
    with pytest.raises(uut.HashMismatch):
        uut.download(sdist.as_uri(), dest, "0" * 64)
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # no partial file left
    uut.download(sdist.as_uri(), dest, _sha(sdist))
    assert dest.read_bytes() == sdist.read_bytes()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, dict[str, object]]]:
    """A local PEP 691 index serving ``/simple/vllm/`` (JSON, set by the test) and the sdist."""
    page: dict[str, object] = {}
    sdist = _sdist(tmp_path / "vllm-9.9.tar.gz")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/simple/vllm/":
                body = json.dumps(page).encode()
                kind = "application/vnd.pypi.simple.v1+json"
            elif self.path == "/files/vllm-9.9.tar.gz":
                body, kind = sdist.read_bytes(), "application/gzip"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    page.update(files=[{"filename": "vllm-9.9.tar.gz", "url": "../../files/vllm-9.9.tar.gz",
                        "hashes": {"sha256": _sha(sdist)}}])
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/", page
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_verifies_caches_and_reuses(
    tmp_path: Path, index: tuple[str, dict[str, object]]
) -> None:
    url, page = index
    cache = tmp_path / "cache"
    path = uut.fetch_sdist("9.9", url, cache)
    good = path.read_bytes()
    assert path == cache / "vllm-9.9.tar.gz"
    path.write_bytes(b"tampered")  # a cached copy with the wrong hash is downloaded again
    assert uut.fetch_sdist("9.9", url, cache).read_bytes() == good
    files = page["files"]
    assert isinstance(files, list)
    files[0]["hashes"] = {"sha256": "f" * 64}  # the index disagrees: nothing is trusted
    with pytest.raises(uut.HashMismatch):
        uut.fetch_sdist("9.9", url, cache)
    assert not path.exists()
    with pytest.raises(uut.IndexUnavailable, match=re.escape("does not list vllm-1.0.tar.gz")):
        uut.fetch_sdist("1.0", url, cache)


def test_offline_is_a_clear_error_unless_a_verified_copy_is_cached(
    tmp_path: Path, index: tuple[str, dict[str, object]]
) -> None:
    url, _ = index
    cache = tmp_path / "cache"
    offline = "http://127.0.0.1:1/simple/"  # nothing listens on port 1
    with pytest.raises(uut.IndexUnavailable, match="cannot read the package index page"):
        uut.fetch_sdist("9.9", offline, cache)
    path = uut.fetch_sdist("9.9", url, cache)
    assert uut.fetch_sdist("9.9", offline, cache) == path  # the hash recorded at download
    path.write_bytes(b"tampered")
    with pytest.raises(uut.HashMismatch):
        uut.fetch_sdist("9.9", offline, cache)


def test_main_exits_2_naming_the_failure_when_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    code = uut.main(["--index-url", "http://127.0.0.1:1/simple/", "--release", "9.9"])
    assert code == 2
    assert "IndexUnavailable: cannot read the package index page" in capsys.readouterr().err


# --- the expected failures ---------------------------------------------------------------------

MINI_TESTS = """\
def test_fails():
    assert 1 == 2


def test_passes():
    pass
"""


def _run_mini(work: Path, xfails: dict[str, str]) -> subprocess.CompletedProcess[str]:
    (work / "tests").mkdir(parents=True, exist_ok=True)
    (work / "tests" / "test_mini.py").write_text(MINI_TESTS, encoding="utf-8")
    (work / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    uut.write_conftest(work, xfails)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--rootdir={work}", "-c", str(work / "pytest.ini"), "tests"]
    for name in uut.own_pytest_plugins():
        command += ["-p", f"no:{name}"]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    return subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                          check=False)


def test_xfails_are_strict(tmp_path: Path) -> None:
    done = _run_mini(tmp_path / "a", {"tests/test_mini.py::test_fails": "a departure"})
    assert done.returncode == 0, done.stdout
    assert "1 passed, 1 xfailed" in done.stdout
    done = _run_mini(tmp_path / "b", {"tests/test_mini.py::test_fails": "a departure",
                                      "tests/test_mini.py::test_passes": "no longer fails"})
    assert done.returncode == 1
    assert "XPASS(strict)" in done.stdout and "no longer fails" in done.stdout


def test_a_stale_or_malformed_entry_is_an_error(tmp_path: Path) -> None:
    uut.check_stale({"tests/a.py::t": "r"}, ["tests/a.py::t", "tests/a.py::u"])
    with pytest.raises(uut.StaleXfail, match=re.escape("tests/a.py::gone")):
        uut.check_stale({"tests/a.py::gone": "r"}, ["tests/a.py::t"])
    path = tmp_path / "x.json"
    for data in ({"entries": [{"id": "a"}]}, {"entries": [{"id": "a", "reason": " "}]},
                 {"entries": [{"id": "a", "reason": "r"}, {"id": "a", "reason": "r"}]}, []):
        path.write_text(json.dumps(data), encoding="utf-8")
        with pytest.raises(uut.StaleXfail):
            uut.load_xfails(path)


def test_the_committed_xfails_file_loads() -> None:
    xfails = uut.load_xfails(uut.DEFAULT_XFAILS)
    assert all(node_id.startswith("tests/core/block/test_") for node_id in xfails)


# --- the stand-in sequence ---------------------------------------------------------------------


def test_stand_in_sequence_drives_the_bundled_tracker() -> None:
    block_size = 4
    allocator = CpuGpuBlockAllocator.create(
        allocator_type="prefix_caching", num_gpu_blocks=8, num_cpu_blocks=8,
        block_size=block_size,
    )
    gpu = allocator._allocators[Device.GPU]  # type: ignore[attr-defined]
    tracker = ComputedBlocksTracker(allocator=allocator, block_size=block_size,
                                    enable_caching=True)
    tokens = list(range(3 * block_size))
    lora = stand_ins.create_dummy_lora_sequence(request_id=0, token_ids=tokens,
                                                block_size=block_size, lora_int_id=7)
    plain = stand_ins.create_dummy_sequence(request_id=1, token_ids=tokens,
                                            block_size=block_size)
    assert plain.extra_hash() is None and lora.extra_hash() is not None
    prev = None
    for start in range(0, 2 * block_size, block_size):  # two of the three blocks, LoRA keyed
        prev = gpu.allocate_immutable_block(prev_block=prev,
                                            token_ids=tokens[start:start + block_size],
                                            extra_hash=lora.extra_hash())
    allocator.mark_blocks_as_computed([])
    assert tracker.get_num_cached_tokens(plain) == 0
    assert tracker.get_num_cached_tokens(lora) == 2 * block_size
    # In prefill the answer is frozen; once every token is computed it is asked again.
    gpu.allocate_immutable_block(prev_block=prev, token_ids=tokens[2 * block_size:],
                                 extra_hash=lora.extra_hash())
    allocator.mark_blocks_as_computed([])
    assert lora.is_prefill()
    assert tracker.get_num_cached_tokens(lora) == 2 * block_size
    lora.data.update_num_computed_tokens(len(tokens))
    assert not lora.is_prefill()
    assert tracker.get_num_cached_tokens(lora) == 3 * block_size
    lora.append_token_id(99, {99: stand_ins.Logprob(logprob=-0.5)})
    assert lora.get_token_ids() == [*tokens, 99] and not lora.is_prefill()
    assert tracker.get_num_cached_tokens(lora) == 3 * block_size
    tracker.remove_seq(lora.seq_id)
    with pytest.raises(ValueError):
        lora.append_token_id(5, {6: stand_ins.Logprob(logprob=0.0)})
    with pytest.raises(ValueError):
        lora.data.update_num_computed_tokens(2)  # more than the sequence holds
