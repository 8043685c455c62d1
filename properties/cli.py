"""``prefixcache check``: run the conformance suite against a target and write a report.

The report (Markdown and JSON) gives the target, its version and features, the profile, a
verdict per invariant family, and for each failure the violation and a replayable script.
Exit status 0 only when the target conforms (expected failures aside).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from models.families import DESCRIPTIONS, Family, Violation

SUITE_DIR = Path(__file__).resolve().parent


@dataclass
class Finding:
    test: str
    family: str
    message: str
    script: str
    expected: bool


@dataclass
class Collector:
    """A pytest plugin object that records outcomes and violations."""

    results: dict[str, str] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Not pytest_report_header: ``--no-header`` suppresses that hook.
        from properties.plugin import pytest_report_header

        self.header = pytest_report_header(session.config)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The final verdict of each test, after every plugin adjusted its report."""
        if report.when == "call" or report.failed:
            verdict = "xfailed" if getattr(report, "wasxfail", "") else report.outcome
            self.results[report.nodeid] = verdict

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        report = outcome.get_result()
        if report.when != "call" and not report.failed:
            return
        exc = call.excinfo.value if call.excinfo is not None else None
        if report.when == "call":
            self._absorbed(item)
        if exc is None:
            return
        from properties.plugin import _leaves, expected_entries, matching

        leaves = list(_leaves(exc))
        violations = [leaf for leaf in leaves if isinstance(leaf, Violation)]
        if len(violations) == len(leaves):
            # One finding per violation, also when Hypothesis reports several distinct ones.
            for leaf in violations:
                notes = "\n".join(getattr(leaf, "__notes__", []))
                expected = bool(getattr(report, "wasxfail", "")) or bool(
                    matching(expected_entries(item.config), leaf))
                self.findings.append(Finding(item.nodeid, leaf.family.value, str(leaf), notes,
                                             expected))
        elif report.failed:
            self.errors += [f"{item.nodeid}: {type(leaf).__name__}: {leaf}" for leaf in leaves]

    def _absorbed(self, item: pytest.Item) -> None:
        """Expected violations the plugin absorbed (or a replay observed): one finding per
        entry and test, so the family verdicts say "expected failure"."""
        from properties.plugin import observed

        seen: dict[str, Violation] = {}
        for entry, violation in observed(item):
            seen.setdefault(entry.id, violation)
        for entry_id, violation in seen.items():
            notes = "\n".join(getattr(violation, "__notes__", []))
            self.findings.append(Finding(item.nodeid, violation.family.value,
                                         f"{violation} (expected: {entry_id})", notes, True))


def family_verdicts(collector: Collector) -> dict[str, str]:
    verdicts = {f.value: "pass" for f in Family}
    for finding in collector.findings:
        current = verdicts.get(finding.family)
        if finding.expected:
            if current == "pass":
                verdicts[finding.family] = "expected failure"
        else:
            verdicts[finding.family] = "FAIL"
    return verdicts


def write_reports(out: Path, collector: Collector, target_line: str, seconds: float) -> bool:
    """Write ``conformance.md`` and ``conformance.json``; returns whether the target conforms."""
    out.mkdir(parents=True, exist_ok=True)
    verdicts = family_verdicts(collector)
    failed = [t for t, r in collector.results.items() if r == "failed"]
    conforming = not failed and not collector.errors
    data = {
        "target": target_line,
        "header": collector.header,
        "conforming": conforming,
        "seconds": round(seconds, 1),
        "families": verdicts,
        "tests": collector.results,
        "findings": [f.__dict__ for f in collector.findings],
        "errors": collector.errors,
    }
    (out / "conformance.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    lines = ["# Conformance report", "", *[f"- {h}" for h in collector.header],
             f"- verdict: **{'CONFORMS' if conforming else 'DOES NOT CONFORM'}** "
             f"({seconds:.0f} s)", "", "| family | invariant | verdict |", "|---|---|---|"]
    lines += [f"| {name} | {DESCRIPTIONS[Family(name)]} | {v} |" for name, v in verdicts.items()]
    lines += ["", "## Tests", "", *[f"- `{t}`: {r}" for t, r in collector.results.items()]]
    for finding in collector.findings:
        kind = "Expected failure" if finding.expected else "Failure"
        lines += ["", f"## {kind}: {finding.family} in `{finding.test}`", "", "```",
                  finding.message, "```"]
        if finding.script:
            lines += ["", "```python", finding.script.split("\n\n", 1)[-1], "```"]
    for error in collector.errors:
        lines += ["", "## Error", "", "```", error, "```"]
    (out / "conformance.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return conforming


def check(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="prefixcache check", description=__doc__)
    parser.add_argument("--allocator", default=None, help="target factory module:callable")
    parser.add_argument("--allocator-type", default="prefix_caching")
    parser.add_argument("--profile", default="ci", help="Hypothesis profile (dev, ci, nightly)")
    parser.add_argument("--report-dir", default="reports", type=Path)
    parser.add_argument("--xfails-file", default=None)
    parser.add_argument("--disable-feature", action="append", default=[])
    parser.add_argument("--max-examples", type=int, default=None)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--step-timeout", type=float, default=None, metavar="SECONDS",
                        help="per-step time limit (default $PREFIXCACHE_STEP_TIMEOUT or 10; "
                             "0 disables it)")
    args = parser.parse_args(argv)
    pytest_args = [str(SUITE_DIR), "-p", "no:cacheprovider", "-v", "--no-header",
                   f"--hypothesis-profile={args.profile}",
                   f"--allocator-type={args.allocator_type}", "--rootdir", str(SUITE_DIR)]
    for flag in ("allocator", "xfails_file", "max_examples", "max_steps", "step_timeout"):
        value = getattr(args, flag)
        if value is not None:
            pytest_args.append(f"--{flag.replace('_', '-')}={value}")
    pytest_args += [f"--disable-feature={f}" for f in args.disable_feature]
    collector = Collector()
    started = time.monotonic()
    code = pytest.main(pytest_args, plugins=[collector])
    from properties.plugin import _target_line

    conforming = write_reports(args.report_dir, collector, _target_line(),
                               time.monotonic() - started)
    print(f"\nreport: {args.report_dir / 'conformance.md'} "
          f"and {args.report_dir / 'conformance.json'}")
    print("verdict:", "CONFORMS" if conforming else "DOES NOT CONFORM")
    return 0 if conforming and code in (0, 5) else 1


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "check":
        print("usage: prefixcache check [--allocator module:callable] [options]; "
              "see prefixcache check --help", file=sys.stderr)
        return 2
    return check(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
