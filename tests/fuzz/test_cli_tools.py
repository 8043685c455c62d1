"""``python -m fuzz`` reaches a family's tools through the roles of ``fuzz.core.tools``: v0's
``replay``, ``traces`` and ``zoo`` work; every zoo runs through its family's machines (v0's
each mutant at the machines its zoo entry names); a family without a role is refused with exit
2 and the subcommands it has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzz.cli import main
from fuzz.core.tools import Traces, Zoo, ZooMutant, subcommands
from fuzz.families.v0.tools import TRACES_DIR
from properties.core import family as families
from tests.toy.family import ToyFamily
from tests.toy.mutants import MUTANTS as TOY_MUTANTS

SHIPPED = sorted(TRACES_DIR.glob("*.jsonl"))


class ToyWithZoo(ToyFamily):
    """The toy family with a zoo: a family outside the package takes the role, and ``zoo``
    runs it through its machine with no edit to the core or the command line. (Named
    ``toy``: the toy machine judges the family of that name.)"""

    def zoo(self) -> dict[str, ZooMutant]:
        return {name: ZooMutant(f"tests.toy.mutants:{name}", frozenset({invariant}))
                for name, (_, _, invariant) in TOY_MUTANTS.items()}


TOY_WITH_ZOO = ToyWithZoo()


def test_the_families_take_the_roles_they_have() -> None:
    v0, v1 = families.by_name("v0"), families.by_name("v1")
    assert isinstance(v0, Traces) and isinstance(v0, Zoo)
    assert subcommands(v0) == ["run", "regress", "replay", "traces", "zoo"]
    assert isinstance(v1, Zoo) and not isinstance(v1, Traces)
    assert subcommands(v1) == ["run", "regress", "zoo"]
    for name in ("sglang", "offload"):
        family = families.by_name(name)
        assert isinstance(family, Zoo) and not isinstance(family, Traces)
        assert subcommands(family) == ["run", "regress", "zoo"]
        zoo = family.zoo()
        assert len(zoo) >= 20
        for mutant_name, mutant in zoo.items():
            assert mutant.spec.endswith(f":{mutant_name}") and mutant.invariants


def test_replay_one_shipped_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(SHIPPED[0])]) == 0
    out = capsys.readouterr().out
    assert f"{SHIPPED[0]}: ok: " in out


def test_replay_refuses_a_file_that_is_no_trace(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    bogus = tmp_path / "bogus.jsonl"
    bogus.write_text('{"not": "a trace"}\n', encoding="utf-8")
    assert main(["replay", str(bogus)]) == 2
    assert "not a trace of family v0" in capsys.readouterr().err


def test_traces_are_recorded_into_a_chosen_folder(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traces", "--out", str(tmp_path)]) == 0
    written = sorted(tmp_path.glob("*.jsonl"))
    assert [p.name for p in written] == [p.name for p in SHIPPED]
    assert main(["replay", *map(str, written)]) == 0
    assert capsys.readouterr().out.count(": ok: ") == len(written)


def _rows(out: str) -> dict[str, list[str]]:
    """The zoo table: mutant -> its cells."""
    rows = [line.strip("|").split("|") for line in out.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows[1:]}


def test_the_v0_zoo_runs_each_mutant_at_its_machines(capsys: pytest.CaptureFixture[str]) -> None:
    """A block-level mutant is found by the block-level machine, an evictor mutant (which the
    block and sequence machines cannot reach) by the evictor-level machine."""
    assert main(["zoo", "--seconds", "40", "--only", "cow_not_recorded",
                 "evictor_update_forward_only"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    found, _, _, invariant, expected, level = rows["cow_not_recorded"]
    assert (found, invariant, expected, level) == ("yes", "COW", "yes", "block_level")
    found, _, _, invariant, expected, level = rows["evictor_update_forward_only"]
    assert (found, invariant, expected, level) == ("yes", "LRU", "yes", "evictor_level")
    assert "found by each mutant's machines (seed 0" in out


def test_the_v1_zoo_runs_through_its_machine(capsys: pytest.CaptureFixture[str]) -> None:
    """The broken bundled pools are targets by name (``tests.zoo.v1.bundled:<variant>``),
    fuzzed through the pool machine."""
    assert main(["--family", "v1", "zoo", "--seconds", "20", "--only",
                 "touch_accepts_foreign"]) == 0
    out = capsys.readouterr().out
    found, _, _, invariant, expected, _ = _rows(out)["touch_accepts_foreign"]
    assert (found, invariant, expected) == ("yes", "CRASH", "yes")
    assert "found by pool_level (seed 0" in out


@pytest.mark.parametrize(("family", "mutant"), [("sglang", "match_skips_partial_node"),
                                                 ("offload", "offer_not_protected")])
def test_every_family_runs_its_zoo_through_its_machines(
        family: str, mutant: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--family", family, "zoo", "--seconds", "20", "--only", mutant]) == 0
    out = capsys.readouterr().out
    found, _, _, _, expected, _ = _rows(out)[mutant]
    assert (found, expected) == ("yes", "yes")
    assert f"mutants of family {family} found by" in out


def test_a_family_named_by_reference_brings_its_own_zoo(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Naming it by reference declares it for this process: both are undone afterwards.
    monkeypatch.setenv(families.ENV_VAR, "")
    monkeypatch.setattr(families, "_loaded", dict(families._loaded))
    assert main(["--family", f"{__name__}:TOY_WITH_ZOO", "zoo", "--seconds", "20"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert sorted(rows) == sorted(TOY_MUTANTS)
    for name, (found, _, _, invariant, expected, _) in rows.items():
        assert (found, invariant, expected) == ("yes", TOY_MUTANTS[name][2], "yes"), name


@pytest.mark.parametrize(("argv", "message"), [
    (["zoo", "--harness", "nope"], "known: block_level, block_level_naive, evictor_level, "
     "refcount_level, sequence_level, sequence_level_naive"),
    (["--family", "v1", "zoo", "--harness", "nope"], "unknown machine level 'nope' of family "
     "'v1'; known: pool_level"),
    (["zoo", "--only", "no_such_mutant"], "no zoo mutant no_such_mutant"),
])
def test_zoo_refuses_unknown_levels_and_mutants(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("family", "argv", "has"), [
    ("v1", ["replay", "trace.jsonl"], "run, regress, zoo"),
    ("v1", ["traces"], "run, regress, zoo"),
    ("sglang", ["traces"], "run, regress, zoo"),
    ("offload", ["replay", "trace.jsonl"], "run, regress, zoo"),
])
def test_a_family_without_the_role_is_refused(family: str, argv: list[str], has: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--family", family, *argv]) == 2
    err = capsys.readouterr().err
    assert f"python -m fuzz {argv[0]}: family {family} does not offer it" in err
    assert err.rstrip().endswith(f"its subcommands: {has}")


def test_regress_asks_for_the_shape_of_a_plain_program(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "program.json"
    program.write_text(json.dumps([{"op": "clear_cows"}]), encoding="utf-8")
    assert main(["regress", str(program), "--name", "x", "--out-dir", str(tmp_path)]) == 2
    assert "give --config KEY=VALUE" in capsys.readouterr().err
    assert main(["regress", str(program), "--name", "x", "--config", "oops"]) == 2
    assert "--config takes KEY=VALUE" in capsys.readouterr().err
