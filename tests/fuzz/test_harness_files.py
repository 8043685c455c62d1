"""Every OSS-Fuzz harness file (``fuzz/families/*/fuzz_*.py``, what
``.clusterfuzzlite/build.sh`` bundles) imports by path and takes seeded random inputs through
``TestOneInput`` without error on its bundled target; each keeps the shape the build expects;
every family has one per machine level, and its first runs under atheris."""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from fuzz.core.harness import HASH_MODE_VAR
from fuzz.core.instrumentation import atheris_module
from fuzz.core.machine_harness import machine_levels
from properties.core import family as families
from properties.core import selection
from properties.core.targets import ENV_VAR, Target

ROOT = Path(__file__).resolve().parents[2]
HARNESS_FILES = sorted((ROOT / "fuzz" / "families").glob("*/fuzz_*.py"))


def _ids(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _load(path: Path) -> ModuleType:
    name = f"_oss_fuzz_harness_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def _bundled_session(bundled: Target, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No target named by the environment; a harness that takes the session's target gets
    the bundled allocator; the session's selection survives."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv(HASH_MODE_VAR, raising=False)
    with selection.kept():
        selection.use(bundled)
        yield


def test_every_family_with_a_fuzz_folder_has_harness_files() -> None:
    assert {path.parent.name for path in HARNESS_FILES} >= {"v0", "v1", "sglang", "offload"}


@pytest.mark.usefixtures("_bundled_session")
@pytest.mark.parametrize("path", HARNESS_FILES, ids=_ids)
def test_the_harness_file_takes_seeded_random_inputs(path: Path) -> None:
    module = _load(path)
    rng = random.Random(0)
    for length in (0, 1, 64, 256, 512):
        module.TestOneInput(rng.randbytes(length))
    assert module.HARNESS.target is not None


@pytest.mark.parametrize("path", HARNESS_FILES, ids=_ids)
def test_the_harness_file_has_the_oss_fuzz_shape(path: Path) -> None:
    """Instrumented imports when run as a script, ``TestOneInput``, an atheris ``__main__``."""
    source = path.read_text(encoding="utf-8")
    assert 'with instrumented(__name__ == "__main__"):' in source
    assert "def TestOneInput(data: bytes) -> None:" in source
    main = source.partition('\nif __name__ == "__main__":\n')[2]
    assert "HARNESS.fuzz_main(sys.argv)" in main


def _fuzzed_families() -> list[str]:
    """Families with a folder under fuzz/families/."""
    return [name for name in families.names() if (ROOT / "fuzz" / "families" / name).is_dir()]


@pytest.mark.parametrize("name", _fuzzed_families())
def test_a_fuzzed_family_has_a_harness_per_machine_level(name: str) -> None:
    family = families.by_name(name)
    levels = machine_levels(family)
    assert levels
    for level in levels:
        path = ROOT / "fuzz" / "families" / name / f"fuzz_{level}.py"
        assert path.is_file(), f"no OSS-Fuzz harness {path.relative_to(ROOT)}"
        assert f'harness_for("{level}", family="{name}")' in path.read_text(encoding="utf-8")


#: One file per family under atheris (its first level): a family's files differ only in the
#: level they name, which the test above checks for each.
FIRST_HARNESS_FILES = [ROOT / "fuzz" / "families" / name / f"fuzz_{next(iter(levels))}.py"
                       for name in _fuzzed_families()
                       if (levels := machine_levels(families.by_name(name)))]


@pytest.mark.skipif(atheris_module() is None, reason="atheris is not installed")
@pytest.mark.parametrize("path", FIRST_HARNESS_FILES, ids=_ids)
def test_the_machine_harness_runs_under_atheris(path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, str(path), "-runs=50", "-seed=1"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(machine route)" in proc.stderr and "Done 50 runs" in proc.stderr
