"""The pytest plugin (entry point ``pytest11: prefixcache``).

Options: ``--allocator module:factory`` (env ``PREFIXCACHE_ALLOCATOR``), ``--allocator-type``,
``--disable-feature NAME`` (repeatable), ``--max-examples``, ``--max-steps``,
``--step-timeout SECONDS`` (env ``PREFIXCACHE_STEP_TIMEOUT``, default 10, ``0``: no limit; a
step that outlives it fails as a hang, see ``properties.runner``), ``--xfails-file`` and
``--skips-file``. The profile is Hypothesis's own
``--hypothesis-profile`` (our profiles are registered on import; see ``profiles.py``).

Expected failures (``--xfails-file``) are deterministic. Each entry is
``{id, family, explanation, config, program}`` plus optional ``class`` (free text: real bug,
design deviation, ...) and ``match``, which narrows or widens what the entry covers:
``{"families": [...], "ops": [kinds], "message": regex, "after": [[kinds], ...]}``. A violation
*matches* an entry when its family is the entry's (or one of ``families``: one upstream defect
often surfaces as several families, depending on what reads the corrupted state) and, where
given, it fired at an operation of one of ``ops``, ``message`` is found in its message
(``re.search``), the operations before it contain one of the ``after`` sequences of kinds as a
subsequence (e.g. ``[["swap", "free"]]``: a swap, later a free), and the program so far used
one of the ``tokens`` (e.g. the values Python's ``hash`` folds onto small ints). The first
matching entry wins, so list narrow entries before broad ones. Other keys (``observe``, used by
``conformance/render_reproducers.py``) are ignored.

- Replay: each entry's program is replayed as its own test (``test_expected_failure[id]``); it
  must still raise a matching violation (reported as xfail), else the entry is stale and the
  test fails ("no longer fails: remove the entry"); a violation of another family fails too.
- Absorption: inside the state machines, a matching violation ends that example quietly (the
  remaining steps of the example are no-ops) and Hypothesis goes on generating, so a target
  with several known deviations is still checked for everything else. A state-machine test
  that absorbed violations and found nothing else is reported as xfail, naming the entries; a
  violation that matches no entry fails the test as usual (with shrinking and a reproducer).
  Mechanics: while an xfails file is loaded, ``OracleMachine.do`` is wrapped (restored at
  unconfigure); an exception the target's own code raises while being observed (e.g. a
  ``RecursionError`` reading a corrupted chain) becomes a CRASH violation so it can match.
- Tolerance: an entry may name deviations the model then accepts besides the contract
  (``"tolerate": [names]``, ``models.capabilities.TOLERABLE``), for a deviation nearly every
  example meets (vLLM's swap-ins counted as cache queries): absorbing it would end almost
  every example before anything else is checked. The state machines and every other entry's
  replay run with it (a target without the deviation still passes); the entry's own replay
  runs without it, so it still fails.
- The terminal summary lists, per entry, how many examples hit it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections import Counter
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import properties.profiles  # noqa: F401  (registers the profiles)
from models.families import Family, Violation
from models.operations import Op
from models.oracle import OutOfContract
from properties import selection
from properties.determinism import fixed_constants
from properties.targets import TargetError


@dataclass(frozen=True, slots=True)
class ExpectedFailure:
    """One xfails-file entry: the target fails ``family``; ``program`` shows it.

    ``ops`` (operation kinds) and ``message`` (a regex) narrow which violations it covers."""

    id: str
    family: Family
    explanation: str
    config: dict[str, int]
    program: list[dict[str, Any]]
    classification: str = ""
    families: tuple[Family, ...] = ()
    ops: tuple[str, ...] = ()
    message: str = ""
    after: tuple[tuple[str, ...], ...] = ()
    tokens: frozenset[int] = frozenset()
    tolerate: frozenset[str] = frozenset()

    def matches(self, violation: Violation, history: Sequence[Op] | None = None) -> bool:
        """Whether ``violation`` is this deviation; ``history`` is the program up to and
        including the failing operation (None: unknown, ``after`` and ``tokens`` unchecked)."""
        if violation.family is not self.family and violation.family not in self.families:
            return False
        if self.ops and not (isinstance(violation.op, Op) and violation.op.kind in self.ops):
            return False
        if self.message and re.search(self.message, violation.message) is None:
            return False
        if history is None:
            return True
        kinds = [op.kind for op in history[:-1]]
        if self.after and not any(_subsequence(seq, kinds) for seq in self.after):
            return False
        return not self.tokens or any(self.tokens & set(_tokens(op)) for op in history)


def _subsequence(wanted: Sequence[str], seen: Sequence[str]) -> bool:
    it = iter(seen)
    return all(kind in it for kind in wanted)


def _tokens(op: Op) -> Iterator[int]:
    """The ints an operation hands the target's hash: tokens, and an int extra hash."""
    yield from getattr(op, "tokens", ())
    for chunk in getattr(op, "chunks", ()):
        yield from chunk
    extra = getattr(op, "extra_hash", None)
    if type(extra) is int:
        yield extra


def load_expected(path: str | None) -> list[ExpectedFailure]:
    if not path:
        return []
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    entries = []
    for e in data:
        match = e.get("match", {})
        entries.append(ExpectedFailure(
            e["id"], Family(e["family"]), e["explanation"], e["config"], e["program"],
            str(e.get("class", "")), tuple(Family(f) for f in match.get("families", ())),
            tuple(match.get("ops", ())), str(match.get("message", "")),
            tuple(tuple(seq) for seq in match.get("after", ())),
            frozenset(int(t) for t in match.get("tokens", ())),
            frozenset(str(name) for name in e.get("tolerate", ()))))
    return entries


def tolerated_by(entries: Sequence[ExpectedFailure],
                 replaying: ExpectedFailure | None = None) -> frozenset[str]:
    """The deviations the model follows while ``entries`` are expected: every entry's
    ``tolerate``, except those of the entry whose own program is ``replaying``."""
    names: set[str] = set()
    for entry in entries:
        if entry is not replaying and entry.id != getattr(replaying, "id", None):
            names |= entry.tolerate
    return frozenset(names)


def matching(entries: list[ExpectedFailure], exc: BaseException) -> list[ExpectedFailure] | None:
    """The entries covering ``exc`` (a violation, or a group of them), or None if any part of
    it is unexpected. A violation raised by a machine step carries the program before it,
    so ``after`` and ``tokens`` conditions hold here exactly as during the run."""
    leaves = list(_leaves(exc))
    found: list[ExpectedFailure] = []
    for leaf in leaves:
        if not isinstance(leaf, Violation):
            return None
        history = getattr(leaf, "prefixcache_history", None)
        entry = next((e for e in entries if e.matches(leaf, history)), None)
        if entry is None:
            return None
        found.append(entry)
    return found or None


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


# --------------------------------------------------------------------------- absorption

_EXPECTED = pytest.StashKey[list[ExpectedFailure]]()
_OBSERVED = pytest.StashKey[list[tuple[ExpectedFailure, Violation]]]()
_hits: dict[str, int] = {}  # entry id -> hits, from the reports (so xdist workers count too)

# Set for the duration of one test call: the session's entries and where to record hits.
_active: tuple[list[ExpectedFailure], list[tuple[ExpectedFailure, Violation]]] | None = None


def expected_entries(config: pytest.Config) -> list[ExpectedFailure]:
    """The session's expected failures (``--xfails-file``)."""
    return config.stash.get(_EXPECTED, [])


def record(entry: ExpectedFailure, violation: Violation) -> None:
    """Note that the running test observed ``entry`` (used by the replay test too)."""
    if _active is not None:
        _active[1].append((entry, violation))


def observed(item: pytest.Item) -> list[tuple[ExpectedFailure, Violation]]:
    """The expected violations ``item`` observed (absorbed or replayed)."""
    return item.stash.get(_OBSERVED, [])


def _raised_by_target(exc: BaseException, alloc: object) -> bool:
    """Whether the innermost frame of ``exc`` runs in the package of the target ``alloc``."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    package = type(alloc).__module__.split(".", 1)[0]
    module = str(tb.tb_frame.f_globals.get("__name__", ""))
    return module == package or module.startswith(package + ".")


def _install_absorption() -> Any:
    """Wrap ``OracleMachine.do`` so a matching violation ends the example quietly; returns the
    original for ``pytest_unconfigure``."""
    from properties.machines.base import OracleMachine

    original = OracleMachine.do

    def do(self: OracleMachine, op: Op) -> None:
        if getattr(self, "_prefixcache_absorbed", False):
            return
        try:
            try:
                original(self, op)
            except (Violation, OutOfContract):
                raise
            except Exception as exc:
                if not _raised_by_target(exc, self.runner.adapter.alloc):
                    raise
                # e.g. reading ``content_hash`` of a corrupted (cyclic) chain while observing
                raise Violation(Family.CRASH, f"observing the target after {op.kind} raised "
                                f"{type(exc).__name__}: {exc}").at(
                                    op, len(self.runner.log) - 1) from exc
        except Violation as violation:
            history = [step.op for step in self.runner.log]
            entry = next((e for e in _active[0] if e.matches(violation, history)), None) \
                if _active is not None else None
            if entry is None:
                # Judged with its history and unexpected: report-time matching must not
                # absorb it as some entry whose ``after`` it was never checked against.
                violation.prefixcache_history = history  # type: ignore[attr-defined]
                raise
            record(entry, violation)
            self._prefixcache_absorbed = True  # type: ignore[attr-defined]

    OracleMachine.do = do  # type: ignore[method-assign]
    return original


# --------------------------------------------------------------------------- hooks


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
    group.addoption("--step-timeout", default=None, metavar="SECONDS",
                    help="per-step time limit for target calls (default "
                         "$PREFIXCACHE_STEP_TIMEOUT or 10; 0 disables it)")
    group.addoption("--xfails-file", default=None,
                    help="JSON list of expected failures (see the plugin docstring)")
    group.addoption("--skips-file", default=None,
                    help="JSON list of {test, reason}: tests to skip, each with its reason")


_ORIGINAL_DO = pytest.StashKey[Any]()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    try:
        selection.select(
            config.getoption("allocator") or os.environ.get("PREFIXCACHE_ALLOCATOR"),
            allocator_type=config.getoption("allocator_type"),
            disable=config.getoption("disable_feature"),
            step_timeout=config.getoption("step_timeout"),
        )
    except TargetError as exc:
        raise pytest.UsageError(str(exc)) from None
    overrides: dict[str, Any] = {}
    if config.getoption("max_examples") is not None:
        overrides["max_examples"] = config.getoption("max_examples")
    if config.getoption("max_steps") is not None:
        overrides["stateful_step_count"] = config.getoption("max_steps")
    if overrides:
        settings.register_profile("prefixcache-session", parent=settings.default, **overrides)
        settings.load_profile("prefixcache-session")
    entries = load_expected(config.getoption("xfails_file"))
    config.stash[_EXPECTED] = entries
    if entries:
        config.stash[_ORIGINAL_DO] = _install_absorption()
    selection.tolerate(tolerated_by(entries))


def pytest_unconfigure(config: pytest.Config) -> None:
    original = config.stash.get(_ORIGINAL_DO, None)
    if original is not None:
        from properties.machines.base import OracleMachine

        OracleMachine.do = original  # type: ignore[method-assign]
        del config.stash[_ORIGINAL_DO]


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
        f"prefixcache step timeout: {_timeout_line()}",
    ]


def _timeout_line() -> str:
    seconds = selection.step_timeout()
    return "none" if seconds is None else f"{seconds:g} s"


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
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    global _active
    hits: list[tuple[ExpectedFailure, Violation]] = []
    item.stash[_OBSERVED] = hits
    _active = (item.config.stash.get(_EXPECTED, []), hits)
    # A derandomized profile promises the same examples every run: see properties.determinism.
    derandomized = settings.default is not None and settings.default.derandomize
    pinned = fixed_constants() if derandomized else contextlib.nullcontext()
    try:
        with pinned:
            yield
    finally:
        _active = None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count hits per entry (reports carry them, so this also works under xdist)."""
    for name, ids in report.user_properties:
        if name == "prefixcache_expected" and isinstance(ids, list):
            for entry_id in ids:
                _hits[entry_id] = _hits.get(entry_id, 0) + 1


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.when != "call":
        return
    hits = observed(item)
    if hits:
        report.user_properties.append(("prefixcache_expected", [e.id for e, _ in hits]))
    if getattr(report, "wasxfail", ""):
        return
    entries = item.config.stash.get(_EXPECTED, [])
    if call.excinfo is not None:
        found = matching(entries, call.excinfo.value)
        if not found:
            return
        report.user_properties.append(("prefixcache_expected", [e.id for e in found]))
    else:
        found = [entry for entry, _ in observed(item)]
        if not found or report.outcome != "passed":
            return
    tally = ", ".join(f"{entry_id} x{n}" for entry_id, n in
                      sorted(Counter(e.id for e in found).items()))
    report.outcome = "skipped"
    report.wasxfail = f"expected failures only: {tally}"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    entries = config.stash.get(_EXPECTED, [])
    if not entries:
        return
    terminalreporter.section("prefixcache expected failures")
    for entry in entries:
        terminalreporter.write_line(f"{entry.id} ({entry.family.value}): "
                                    f"hit by {_hits.get(entry.id, 0)} test(s) or example(s)")
