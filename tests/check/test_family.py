"""The family registry (``properties.core.family``): declared families load by name, a target
is given the family that accepts it (an explicit name wins, the default comes last), and the
core reaches the family only through the target."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from models.families.v0 import operations as ops
from properties.core import cli
from properties.core import family as families
from properties.families.v0.family import DEFAULT_SPEC, FAMILY


class _Other:
    """A stand-in third-party family: it accepts exactly one spec."""

    name = "other"
    machines = Path("/nonexistent/other-machines")

    def accepts(self, spec_or_factory: object) -> bool:
        return spec_or_factory == "other.pkg:make"


OTHER = _Other()


@pytest.fixture
def other_declared(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An entry point ``other`` in ``prefixcache.families``, as an installed package would
    declare it."""
    real = importlib.metadata.entry_points

    def entry_points(**kw: Any) -> Any:
        if kw.get("group") == families.ENTRY_POINT_GROUP:
            return [importlib.metadata.EntryPoint("other", f"{__name__}:OTHER",
                                                  families.ENTRY_POINT_GROUP),
                    *real(**kw)]
        return real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    families._loaded.pop("other", None)
    yield
    families._loaded.pop("other", None)


def test_v0_is_declared_and_loads_by_name() -> None:
    assert "v0" in families.names()
    assert families.by_name("v0") is FAMILY
    assert families.default() is FAMILY
    with pytest.raises(families.FamilyError, match="no family 'nope'"):
        families.by_name("nope")


def test_v0_accepts_block_manager_factories_only() -> None:
    assert FAMILY.accepts(DEFAULT_SPEC)
    assert FAMILY.accepts("properties.upstream:vllm_v0_allocator")
    assert not FAMILY.accepts("prefixcache.v1.core.block_pool:BlockPool")  # a class
    assert not FAMILY.accepts("no_such_module:factory")


def test_an_entry_point_family_is_detected_before_the_default(other_declared: None) -> None:
    assert families.names()[0] == "other" and "v0" in families.names()
    assert families.select("other.pkg:make") is OTHER
    assert families.select(DEFAULT_SPEC) is FAMILY
    assert families.select("other.pkg:make", "v0") is FAMILY  # an explicit name wins
    assert families.select(None) is FAMILY


def test_check_runs_the_machines_of_the_targets_family(other_declared: None) -> None:
    args = cli.parser().parse_args(["--allocator", "other.pkg:make"])
    assert cli.pytest_arguments(args)[0] == str(OTHER.machines)
    args = cli.parser().parse_args([])
    assert cli.pytest_arguments(args)[0] == str(FAMILY.machines)
    args = cli.parser().parse_args(["--family", "nope"])
    assert cli.check(["--family", "nope"]) == cli.EXIT_ERROR
    with pytest.raises(families.FamilyError):
        cli.pytest_arguments(args)


def test_a_declared_family_that_names_itself_otherwise_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(families, "BUILTIN", (("w0", "properties.families.v0.family:FAMILY"),))
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [])
    with pytest.raises(families.FamilyError, match="names itself 'v0'"):
        families.by_name("w0")


def test_v0_operations_round_trip_through_the_family() -> None:
    program = [ops.AllocateMutable(None), ops.Swap((0,), ops.Dev.GPU, ops.Dev.CPU),
               ops.AllocateImmutableChain(None, ((1, 2), (3, 4)))]
    vocabulary = FAMILY.vocabulary
    assert [vocabulary.op_from_json(vocabulary.op_to_json(op)) for op in program] == program
    assert all(vocabulary.is_op(op) for op in program)
    assert not vocabulary.is_op({"op": "free"})


def test_a_shorter_chain_drops_the_handle_of_its_chunk() -> None:
    chain = ops.AllocateImmutableChain(None, ((1,), (2,), (3,)))
    smaller = list(FAMILY.smaller_ops(chain, {"block": (4, 5, 6)}))
    assert smaller == [(ops.AllocateImmutableChain(None, ((1,), (2,))), {"block": (6,)}),
                       (ops.AllocateImmutableChain(None, ((1,), (3,))), {"block": (5,)}),
                       (ops.AllocateImmutableChain(None, ((2,), (3,))), {"block": (4,)})]
    # the allocation did not complete: nothing to renumber
    assert list(FAMILY.smaller_ops(chain, {"block": (4,)})) == []
    assert list(FAMILY.smaller_ops(ops.AllocateMutable(None), {"block": (0,)})) == []


def test_a_checkout_declares_its_families_in_its_own_pyproject(tmp_path: Path) -> None:
    declared = dict(families._checkout_families())
    for name in ("v0", "v1", "v1-manager", "sglang", "offload"):
        assert families._load(name, declared[name]).name == name
    assert families._checkout_families(tmp_path / "absent.toml") == ()
    broken = tmp_path / "pyproject.toml"
    broken.write_text("[project\n", encoding="utf-8")
    assert families._checkout_families(broken) == ()
