"""``python -m fuzz --family NAME``: the v1 family's ``pool_level`` harness (its pool machine,
the machine route) through the core (engine, harness, crash files, regress from the crash's
record and from the raw input alone), and the errors for an unknown family, a level of another
family and a subcommand the family does not offer."""

from __future__ import annotations

import json
import logging
import runpy
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzz.cli import main
from properties.core import selection
from tests.zoo.v1.bundled import VARIANTS
from tests.zoo.v1.bundled_copy import patched_bundled_pool

#: A v1 zoo variant the engine reaches within a few dozen executions (45 when measured).
VARIANT = next(v for v in VARIANTS if v.name == "free_drops_two_refs")


@pytest.fixture(autouse=True)
def _kept_selection() -> Iterator[None]:
    """The machine route selects its target; the session's selection survives."""
    with selection.kept():
        yield


def _main(argv: list[str]) -> int:
    """``python -m fuzz`` as a process runs it: what the machine route selects goes with it
    (a regression test replays against the session's target)."""
    with selection.kept():
        return main(argv)


@pytest.fixture
def variant_spec() -> str:
    logging.getLogger("prefixcache_zoo_v1").setLevel(logging.ERROR)
    patched_bundled_pool(VARIANT.name, VARIANT.patches)  # its package is importable now
    return f"prefixcache_zoo_v1.{VARIANT.name}.block_pool:BlockPool"


def test_v1_run_clean_on_the_bundled_pool(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--family", "v1", "run", "--engine", "builtin", "--runs", "80", "--time", "0",
                 "--corpus", str(tmp_path / "corpus"), "--artifacts", str(tmp_path / "art"),
                 "--report-every", "1000"])
    out = capsys.readouterr().out
    assert code == 0
    assert "machine route" in out
    assert "[pool_level] 80 executions" in out and "failures 0" in out
    assert "prefixcache.v1.core.block_pool:BlockPool" in out  # the v1 bundled pool
    assert any((tmp_path / "corpus").iterdir())
    assert not (tmp_path / "art").exists()


def test_v1_run_finds_a_zoo_variant_and_regress_keeps_it(
        tmp_path: Path, variant_spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = _main(["run", "pool_level", "--family", "v1", "--engine", "builtin", "--allocator",
                 variant_spec, "--runs", "300", "--time", "0", "--artifacts", str(tmp_path),
                 "--stop-on-failure", "--report-every", "1000"])
    out = capsys.readouterr().out
    assert code == 1
    assert "VIOLATION" in out and f"[{VARIANT.family.value}]" in out
    assert "B = pool.blocks" in out  # the v1 script
    crashes = sorted(p for p in tmp_path.iterdir() if p.suffix != ".json")
    assert len(crashes) == 1 and crashes[0].name.startswith("crash-pool_level-")
    record = json.loads(crashes[0].with_suffix(".json").read_text(encoding="utf-8"))
    assert record["invariant"] == VARIANT.family.value and record["target"] == variant_spec
    assert record["family"] == "v1" and record["route"] == "machine"
    assert record["config"]["group_block_sizes"] == [2, 6]

    out_dir = tmp_path / "regressions"
    assert _main(["--family", "v1", "regress", str(crashes[0]), "--name", "v1 double drop",
                 "--allocator", variant_spec, "--out-dir", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert f"[{VARIANT.family.value}]" in out  # judged against the variant again
    test_file = out_dir / "test_v1_double_drop.py"
    assert "FAMILY = 'v1'" in test_file.read_text(encoding="utf-8")
    # Against the bundled v1 pool (the bug fixed) the regression test passes.
    runpy.run_path(str(test_file))["test_v1_double_drop"]()

    # The raw input alone (no record beside it) runs through the machine again.
    raw = tmp_path / "raw" / crashes[0].name
    raw.parent.mkdir()
    shutil.copy(crashes[0], raw)
    assert _main(["--family", "v1", "regress", str(raw), "--name", "v1 raw",
                 "--allocator", variant_spec, "--out-dir", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert f"[{VARIANT.family.value}]" in out  # the input ran into the same failure
    raw_test = out_dir / "test_v1_raw.py"
    assert "(harness pool_level, target" in raw_test.read_text(encoding="utf-8")
    runpy.run_path(str(raw_test))["test_v1_raw"]()


def test_unknown_family_lists_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--family", "v9", "run"]) == 2
    err = capsys.readouterr().err
    assert "no family 'v9'" in err
    known = err.split("known: ", 1)[1].strip().split(", ")
    assert {"v0", "v1"} <= set(known)


def test_a_level_of_another_family_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--family", "v1", "run", "block_level", "--engine", "builtin"]) == 2
    assert "unknown machine 'block_level' of family 'v1'; known: pool_level" \
        in capsys.readouterr().err


def test_a_tool_the_family_lacks_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--family", "v1", "replay", "trace.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "family v1 does not offer it" in err and "its subcommands: run, regress" in err
