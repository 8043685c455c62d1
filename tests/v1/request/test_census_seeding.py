"""The API-call censuses are the same run in every process. Hypothesis seeds a derandomized
state machine from a digest of its ``__init__`` signature, so the machine a census builds must
show no address there (a default argument bound to a function printed as ``<function ... at
0x...>`` made the manager census draw other programs in each process)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.internal.reflection import get_signature

from properties.families.v1 import api_calls as pool_calls
from properties.families.v1 import targets
from properties.families.v1.request import api_calls as manager_calls
from properties.families.v1.request.target import FULL, vllm_v1_manager_on_bundled_pool


def _machines(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[type]:
    """The machines ``module``'s census hands to Hypothesis (none is run)."""
    seen: list[type] = []
    monkeypatch.setattr(module, "run_state_machine_as_test",
                        lambda machine, settings: seen.append(machine))
    return seen


def _assert_seeded_by_code(machines: list[type]) -> None:
    assert machines, "the census built no machine"
    for machine in machines:
        shown = repr(get_signature(machine))
        assert " at 0x" not in shown, shown


def test_the_pool_census_machine_shows_no_address(monkeypatch: pytest.MonkeyPatch) -> None:
    machines = _machines(monkeypatch, pool_calls)
    pool_calls.count_calls(targets.load(targets.DEFAULT_SPEC), "ci", max_examples=1)
    _assert_seeded_by_code(machines)


def test_the_manager_census_machines_show_no_address(monkeypatch: pytest.MonkeyPatch) -> None:
    machines = _machines(monkeypatch, manager_calls)
    manager_calls.count_calls(vllm_v1_manager_on_bundled_pool(), max_examples=1,
                              configs={"full": FULL, "again": FULL})
    assert len(machines) == 2
    _assert_seeded_by_code(machines)


def test_a_default_bound_to_a_function_would_be_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: the census's old counting ``__init__`` (defaults bound to the
    machine's own ``__init__`` and the configuration's name) shows an address."""
    class Machine:
        def __init__(self) -> None:
            pass

    def counted_init(self: Any, _init: Any = Machine.__init__, _name: str = "full") -> None:
        _init(self)

    Machine.__init__ = counted_init  # type: ignore[method-assign]
    with pytest.raises(AssertionError, match="at 0x"):
        _assert_seeded_by_code([Machine])
