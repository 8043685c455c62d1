"""The pytest plugin (entry point ``pytest11: prefixcache``).

Options: ``--allocator module:factory`` (env ``PREFIXCACHE_ALLOCATOR``), ``--allocator-type``,
``--disable-feature NAME`` (repeatable), ``--max-examples``, ``--max-steps``,
``--xfails-file`` and ``--skips-file``. The profile is Hypothesis's own
``--hypothesis-profile`` (our profiles are registered on import; see ``profiles.py``).

Expected failures are deterministic: each entry of the xfails file carries the counterexample
program that reproduces it. The entry's program is replayed as its own test (it must still fail
with the entry's family, else the entry is reported as stale), and a state-machine failure of an
expected family is reported as xfail rather than as a failure.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import properties.profiles  # noqa: F401  (registers the profiles)
from models.families import Family, Violation
from properties import selection


@dataclass(frozen=True, slots=True)
class ExpectedFailure:
    """One xfails-file entry: the target fails ``family``; ``program`` shows it."""

    id: str
    family: Family
    explanation: str
    config: dict[str, int]
    program: list[dict[str, Any]]


def load_expected(path: str | None) -> list[ExpectedFailure]:
    if not path:
        return []
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [ExpectedFailure(e["id"], Family(e["family"]), e["explanation"], e["config"],
                            e["program"]) for e in data]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("prefixcache", "prefix-caching allocator conformance")
    group.addoption("--allocator", default=None,
                    help="target factory module:callable (default $PREFIXCACHE_ALLOCATOR or "
                         "the bundled allocator)")
    group.addoption("--allocator-type", default="prefix_caching",
                    choices=("prefix_caching", "naive"))
    group.addoption("--disable-feature", action="append", default=[], metavar="NAME",
                    help="treat a capability as absent (prefix_caching, lru, swap, extra_keys, "
                         "atomic, typed_errors, introspection)")
    group.addoption("--max-examples", type=int, default=None)
    group.addoption("--max-steps", type=int, default=None)
    group.addoption("--xfails-file", default=None, help="JSON list of expected failures")
    group.addoption("--skips-file", default=None,
                    help="JSON list of {test, reason}: tests to skip, each with its reason")


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    selection.select(
        config.getoption("allocator") or os.environ.get("PREFIXCACHE_ALLOCATOR"),
        allocator_type=config.getoption("allocator_type"),
        disable=config.getoption("disable_feature"),
    )
    overrides: dict[str, Any] = {}
    if config.getoption("max_examples") is not None:
        overrides["max_examples"] = config.getoption("max_examples")
    if config.getoption("max_steps") is not None:
        overrides["stateful_step_count"] = config.getoption("max_steps")
    if overrides:
        settings.register_profile("prefixcache-session", parent=settings.default, **overrides)
        settings.load_profile("prefixcache-session")
    config.stash[_EXPECTED] = load_expected(config.getoption("xfails_file"))


_EXPECTED = pytest.StashKey[list[ExpectedFailure]]()


def _target_line() -> str:
    try:
        return selection.current_target().describe()
    except Exception as exc:  # reported in the header; the tests that need it fail clearly
        return f"cannot load target: {exc}"


def pytest_report_header(config: pytest.Config) -> list[str]:
    current = settings()
    seed = config.getoption("hypothesis_seed", default=None)
    return [
        f"prefixcache target: {_target_line()}",
        f"prefixcache profile: {settings.get_current_profile_name()} "
        f"(max_examples={current.max_examples}, steps={current.stateful_step_count}, "
        f"derandomize={current.derandomize}, seed={seed if seed is not None else 'random'})",
        f"prefixcache expected failures: {len(config.stash.get(_EXPECTED, []))}",
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    entries = metafunc.config.stash.get(_EXPECTED, [])
    if "expected_failure" in metafunc.fixturenames and entries:
        metafunc.parametrize("expected_failure", entries, ids=[e.id for e in entries])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Without an xfails file there is nothing to replay: drop the (empty) replay test.
    items[:] = [i for i in items
                if not (i.name.startswith("test_expected_failure") and "[" not in i.name)]
    path = config.getoption("skips_file")
    if not path:
        return
    for entry in json.loads(Path(path).read_text(encoding="utf-8")):
        for item in items:
            if entry["test"] in item.nodeid:
                item.add_marker(pytest.mark.skip(reason=entry["reason"]))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or report.when != "call":
        return
    exc = call.excinfo.value
    expected = {e.family: e for e in item.config.stash.get(_EXPECTED, [])}
    if isinstance(exc, Violation) and exc.family in expected:
        entry = expected[exc.family]
        report.outcome = "skipped"
        report.wasxfail = f"expected {exc.family.value} failure ({entry.id}): {entry.explanation}"
