"""The conformance report of ``prefixcache check``: on the terminal while the suite runs, then
as ``conformance.md`` and ``conformance.json``.

Terminal: a header (target, version, features, profile, seed, expected failures), one progress
line per machine or corpus (examples and steps done, elapsed, findings so far; redrawn in place
on a terminal, printed once when it ends otherwise), a verdict per invariant family, each
distinct deviation once (by signature: family, one-line explanation, how often and where, the
violation and the shortest replayable program), and the paths written.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pytest

from models.core.invariants import Violation
from properties.core import family as families
from properties.core import plugin, robustness, selection
from properties.core.baseline import Absorbed, Deviation, absorbed_lines

#: Redraw the progress line at most this often (seconds), on a terminal only.
REDRAW = 0.25


@dataclass
class Finding:
    """An expected failure absorbed or replayed (unexpected ones are :class:`Deviation`)."""

    test: str
    family: str
    message: str
    script: str
    expected: bool = True


def label(nodeid: str) -> str:
    """A short name for a test: its machine's test class in words (``TestBlockLevelNaive``:
    ``block level naive``), ``replay ID``."""
    name = nodeid.rsplit("/", 1)[-1]
    replay = re.search(r"test_expected_failure\[(.+)\]", name)
    if replay:
        return f"replay {replay.group(1)}"
    machine = re.search(r"::Test(\w+)::", name)
    if machine:
        words = re.findall(r"[A-Z][a-z0-9]*|[a-z0-9]+", machine.group(1))
        return " ".join(word.lower() for word in words)
    return name


@dataclass
class Collector:
    """A pytest plugin object: prints the live terminal report and records outcomes."""

    out: TextIO = sys.stdout
    live: bool = True  # print the header and the progress lines
    results: dict[str, str] = field(default_factory=dict)
    expected: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    _started: float = 0.0
    _drawn: float = 0.0
    _nodeid: str = ""
    _replays: dict[str, int] = field(default_factory=dict)

    # ------------------------------------------------------------------ hooks

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Not pytest_report_header: ``--no-header`` suppresses that hook.
        self.header = plugin.pytest_report_header(session.config)
        if self.live:
            self.out.write("prefixcache check\n")
            for line in self.header:
                key, _, value = line.removeprefix("prefixcache ").partition(": ")
                self.out.write(f"  {key + ':':<22}{value}\n")
            self.out.write("\n")
            self.out.flush()

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self._nodeid, self._started, self._drawn = nodeid, time.monotonic(), 0.0
        plugin.PROGRESS.reset()
        plugin.PROGRESS.ticker = self._tick if self.live and self._tty() else None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The final verdict of each test, after every plugin adjusted its report."""
        if report.when == "call" or report.failed:
            verdict = "xfailed" if getattr(report, "wasxfail", "") else report.outcome
            self.results[report.nodeid] = verdict
        names = {name for name, _ in report.user_properties}
        raised = sum(len(v) for name, v in report.user_properties
                     if name == "prefixcache_deviations" and isinstance(v, list))
        if report.when == "call" and not plugin.PROGRESS.findings:
            plugin.PROGRESS.findings = raised  # deviations that ended the test
        if report.failed and not names & {"prefixcache_deviations", "prefixcache_repeats"}:
            # Not a deviation: a stale expected failure, or an error outside the oracle.
            lines = report.longreprtext.strip().splitlines()
            last = lines[-1] if lines else report.outcome
            self.errors.append(f"{report.nodeid}: {last}")

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        plugin.PROGRESS.ticker = None
        if not self.live:
            return
        verdict = self.results.get(nodeid, "?")
        name = label(nodeid)
        if name.startswith("replay "):
            self._replays[verdict] = self._replays.get(verdict, 0) + 1
            return
        self._flush_replays()
        self.out.write("\r" + self._line(verdict) + "\n")
        self.out.flush()

    def pytest_sessionfinish(self) -> None:
        if self.live:
            self._flush_replays()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        report = outcome.get_result()
        if report.when != "call":
            return
        seen: dict[str, Violation] = {}
        for entry, violation in plugin.observed(item):
            seen.setdefault(entry.id, violation)
        for entry_id, violation in seen.items():
            notes = "\n".join(getattr(violation, "__notes__", []))
            self.expected.append(Finding(item.nodeid, violation.family.value,
                                         f"{violation} (expected: {entry_id})", notes))

    # ------------------------------------------------------------------ progress

    @staticmethod
    def _tty() -> bool:
        return sys.stdout.isatty()

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._drawn >= REDRAW:
            self._drawn = now
            self.out.write("\r" + self._line("running"))
            self.out.flush()

    def _line(self, verdict: str) -> str:
        p = plugin.PROGRESS
        done = (f"{p.examples:>5} examples {p.steps:>7} steps" if p.steps
                else f"{p.examples:>5} seeds".ljust(28))
        return (f"  {label(self._nodeid):<32}{done} {time.monotonic() - self._started:>6.1f} s"
                f"  findings {p.findings:<4} {verdict}")

    def _flush_replays(self) -> None:
        if self._replays:
            tally = ", ".join(f"{n} {v}" for v, n in sorted(self._replays.items()))
            self.out.write(f"  {'expected-failure replays':<32}{tally}\n")
            self._replays.clear()


# --------------------------------------------------------------------------- verdicts


def family_verdicts(deviations: list[Deviation], expected: list[Finding]) -> dict[str, str]:
    """Per invariant family the selected API family checks: ``pass``, ``FAIL`` or ``expected
    failure`` (one it never checks has no row)."""
    verdicts = {name: "pass" for name in _invariants()}
    for finding in expected:
        if verdicts.get(finding.family) == "pass":
            verdicts[finding.family] = "expected failure"
    for dev in deviations:
        verdicts[dev.family] = "FAIL"
    return verdicts


def _invariants() -> dict[str, str]:
    """The selected family's invariants: short name -> the promise, in its words."""
    return {inv.value: inv.description for inv in families.by_name(selection.family_name())
            .invariants}


def _counted(verdicts: dict[str, str], deviations: list[Deviation]) -> dict[str, str]:
    """The verdicts with the number of distinct deviations of each failing family."""
    counts = {name: sum(1 for d in deviations if d.family == name) for name in verdicts}
    return {name: f"{v} ({counts[name]} distinct)" if v == "FAIL" else v
            for name, v in verdicts.items()}


def _body(script: str) -> str:
    """A reproducer script without its docstring (the violation is printed above it)."""
    return script.split('"""\n', 1)[-1] if script.startswith('"""') else script


def _shape(cfg: dict[str, Any]) -> str:
    """The pool shape of a replay: its fields (the family's JSON form)."""
    return ", ".join(f"{k} {v}" for k, v in cfg.items())


def _where(dev: Deviation) -> str:
    tests = ", ".join(label(t) for t in dev.tests)
    return f"met {dev.count}x in {tests}"


def render_terminal(deviations: list[Deviation], collector: Collector, verdicts: dict[str, str],
                    conforming: bool, seconds: float,
                    robust: Sequence[robustness.Finding] = ()) -> str:
    """The part printed after the run: verdicts, distinct deviations, robustness findings,
    errors."""
    described = _invariants()
    lines = ["", f"{'invariant':<10}{'verdict':<22}promise"]
    lines += [f"{name:<10}{v:<22}{described.get(name, '')}"
              for name, v in _counted(verdicts, deviations).items()]
    if deviations:
        lines += ["", f"{len(deviations)} distinct deviation(s):"]
    for n, dev in enumerate(deviations, 1):
        sig = dev.signature
        lines += ["", f"{n}. [{dev.family}] {dev.explanation}",
                  f"   {_where(dev)}; "
                  + (f"{sig.allocator_type} allocator; " if sig.allocator_type else "")
                  + "after "
                  f"{', '.join(dev.steps_before) or 'nothing'}", ""]
        if dev.worse:
            lines += [f"   worse than the baseline: {dev.worse}"]
        if dev.measures:
            lines += [f"   size: {measures_text(dev)}"]
        lines += [f"   {line}" for line in dev.message.splitlines()]
        if dev.program:
            lines += ["", f"   replay ({len(dev.program)} step(s), {_shape(dev.config)}):",
                      ""]
            lines += [f"   {line}".rstrip() for line in _body(dev.script).splitlines()]
    hit = sorted({f.message.rsplit("(expected: ", 1)[-1].rstrip(")") for f in collector.expected})
    if hit:
        lines += ["", f"expected failures met: {len(hit)} entries ({', '.join(hit)})"]
    lines += _robustness_lines(robust)
    for error in collector.errors:
        lines += ["", f"error: {error}"]
    verdict = "CONFORMS" if conforming else "DOES NOT CONFORM"
    lines += ["", f"verdict: {verdict} ({len(deviations)} distinct deviation(s), "
                  f"{seconds:.0f} s)"]
    return "\n".join(lines) + "\n"


def _robustness_lines(robust: Sequence[robustness.Finding]) -> list[str]:
    """The robustness section: misuse the target accepted, each with its replay."""
    if not robust:
        return []
    lines = ["", f"{len(robust)} robustness finding(s) (misuse the target accepted; not "
                 "contract violations, they fail the check only with --strict-robustness):"]
    for n, finding in enumerate(robust, 1):
        lines += ["", f"{n}. [{finding.kind}] {finding.detail}"]
        if finding.script:
            lines += ["", "   replay:", ""]
            lines += [f"   {line}".rstrip() for line in _body(finding.script).splitlines()]
    return lines


def measures_text(dev: Deviation) -> str:
    """A deviation's sizes, the worst met, on one line."""
    return "; ".join(str(m) for m in dev.measures)


def render_absorbed(rows: list[Absorbed], strict: bool) -> str:
    """Per expected failure, the distinct mechanisms the run absorbed, too-wide entries flagged
    (printed after the verdicts; "" when no entry absorbed anything)."""
    lines = absorbed_lines(rows)
    if not lines:
        return ""
    wide = [row.entry_id for row in rows if row.too_wide]
    out = ["", "mechanisms absorbed per expected failure:", *[f"  {line}" for line in lines]]
    if wide:
        out += ["", f"too wide: {', '.join(wide)} (each absorbed a mechanism that does not pass "
                    "through its own program's: split or narrow it, or list it in instances"
                + ("; --strict-xfails fails the check)" if strict else
                   "; --strict-xfails would fail the check)")]
    return "\n".join(out) + "\n"


def absorbed_json(rows: list[Absorbed]) -> list[dict[str, Any]]:
    return [row.to_json() for row in rows if row.mechanisms or row.own is not None]


def write_reports(out: Path, collector: Collector, deviations: list[Deviation],
                  target_line: str, conforming: bool, seconds: float,
                  absorbed: list[Absorbed] | None = None,
                  robust: Sequence[robustness.Finding] = ()) -> dict[str, str]:
    """Write ``conformance.md`` and ``conformance.json``; returns the family verdicts.
    ``absorbed``: per expected failure, the mechanisms it absorbed (too-wide ones flagged);
    ``robust``: the robustness findings."""
    out.mkdir(parents=True, exist_ok=True)
    verdicts = family_verdicts(deviations, collector.expected)
    findings = [{"test": d.tests[0] if d.tests else "", "family": d.family,
                 "message": d.message, "script": d.script, "expected": False,
                 "signature": d.signature.key(), "key": d.key, "count": d.count, "tests": d.tests,
                 "config": d.config, "program": d.program,
                 "measures": [m.to_json() for m in d.measures], "worse": d.worse}
                for d in deviations]
    findings += [f.__dict__ for f in collector.expected]
    data = {
        "verdict": "conforms" if conforming else "deviations",
        "target": target_line,
        "header": collector.header,
        "conforming": conforming,
        "seconds": round(seconds, 1),
        "families": verdicts,
        "tests": collector.results,
        "findings": findings,
        "robustness": [f.to_json() for f in robust],
        "errors": collector.errors,
        "absorbed": absorbed_json(absorbed or []),
    }
    (out / "conformance.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    lines = ["# Conformance report", "", *[f"- {h}" for h in collector.header],
             f"- verdict: **{'CONFORMS' if conforming else 'DOES NOT CONFORM'}** "
             f"({seconds:.0f} s, {len(deviations)} distinct deviation(s))", "",
             "| invariant | promise | verdict |", "|---|---|---|"]
    described = _invariants()
    lines += [f"| {name} | {described.get(name, '')} | {v} |"
              for name, v in _counted(verdicts, deviations).items()]
    lines += ["", "## Tests", "", *[f"- `{t}`: {r}" for t, r in collector.results.items()]]
    for n, dev in enumerate(deviations, 1):
        lines += ["", f"## Deviation {n}: [{dev.family}] {dev.explanation}", "",
                  f"Signature `{dev.key}`; {_where(dev)}."]
        if dev.worse:
            lines += ["", f"**Worse than the baseline**: {dev.worse}."]
        if dev.measures:
            lines += ["", f"Size: {measures_text(dev)}."]
        lines += ["", "```", dev.message, "```"]
        if dev.script:
            lines += ["", "```python", _body(dev.script), "```"]
    for finding in collector.expected:
        lines += ["", f"## Expected failure: {finding.family} in `{finding.test}`", "", "```",
                  finding.message, "```"]
    for n, robust_finding in enumerate(robust, 1):
        lines += ["", f"## Robustness finding {n}: {robust_finding.kind}", "",
                  robust_finding.detail]
        if robust_finding.script:
            lines += ["", "```python", _body(robust_finding.script), "```"]
    for error in collector.errors:
        lines += ["", "## Error", "", "```", error, "```"]
    rows = absorbed_lines(absorbed or [])
    if rows:
        lines += ["", "## Mechanisms absorbed per expected failure", "", "```", *rows, "```"]
    (out / "conformance.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return verdicts


def write_not_run(out: Path, why: str, collector: Collector | None = None) -> None:
    """The reports of a check that reached no verdict: ``not run`` and why, no verdict rows."""
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "verdict": "not run",
        "why": why,
        "header": collector.header if collector is not None else [],
        "conforming": None,
        "families": {},
        "tests": collector.results if collector is not None else {},
        "findings": [],
        "errors": collector.errors if collector is not None else [],
    }
    (out / "conformance.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    lines = ["# Conformance report", "", "- verdict: **NOT RUN**", "", "```", why, "```"]
    (out / "conformance.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
