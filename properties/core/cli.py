"""``prefixcache check``: run the conformance suite against a target, print a conformance
report and write it (Markdown and JSON).

The terminal shows a header (target, version, features, profile, seed), one progress line per
machine, a verdict per invariant family and each distinct deviation once, with the shortest
program that replays it; raw pytest output only with ``-v`` or ``--pytest-args``.

``--all`` keeps exploring after a deviation (each distinct one, by signature, is absorbed and
the machines run their whole budget); ``--write-xfails FILE`` writes the deviations found as an
xfails file, which ``--xfails-file FILE`` then accepts: only new deviations fail the check (and
findings worse than the size an entry recorded); ``--strict-xfails`` also fails on an entry that
absorbed a mechanism not passing through its own program's (too wide).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from properties.core import family as families
from properties.core import plugin
from properties.core.baseline import absorbed_by_entry
from properties.core.report import (
    Collector,
    family_verdicts,
    render_absorbed,
    render_terminal,
    write_not_run,
    write_reports,
)
from properties.core.targets import ENV_VAR, TargetError, load_target

SUITE_DIR = Path(__file__).resolve().parents[1]

EXIT_CONFORMS, EXIT_DEVIATIONS, EXIT_ERROR = 0, 1, 2

EPILOG = """exit status:
  0  the target conforms (deviations listed in --xfails-file aside)
  1  deviations (or an expected failure that no longer fails: a stale entry)
  2  usage error, or the target cannot be loaded or built

examples:
  prefixcache check --family NAME            # the family's bundled reference
  prefixcache check --allocator mypackage.cache:create --all --write-xfails my.xfails.json
  prefixcache check --allocator mypackage.cache:create --xfails-file my.xfails.json
"""

#: pytest's own exit codes that mean no verdict was reached.
_NO_VERDICT = {pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR,
               pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.NO_TESTS_COLLECTED}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="prefixcache check", description=__doc__,
                                epilog=EPILOG, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--allocator", default=None,
                   help="target factory module:callable (default: the bundled allocator)")
    p.add_argument("--family", default=None, metavar="NAME",
                   help="the target's allocator family (default: detected from the target; "
                        "it decides which machines run)")
    p.add_argument("--allocator-type", default=None, metavar="NAME",
                   help="the variant of the target to judge (default: its family's first)")
    p.add_argument("--profile", default="ci", help="Hypothesis profile (dev, ci, nightly, ...)")
    p.add_argument("--seed", type=int, default=None,
                   help="Hypothesis seed (profiles that are not derandomized)")
    p.add_argument("--report-dir", default="reports", type=Path)
    p.add_argument("--xfails-file", default=None, metavar="FILE",
                   help="expected failures: listed deviations do not fail the check")
    p.add_argument("--write-xfails", default=None, metavar="FILE",
                   help="write the deviations found (and --xfails-file's entries) to FILE")
    p.add_argument("--strict-xfails", action="store_true",
                   help="fail when an expected failure is too wide (absorbed a mechanism "
                        "that does not pass through its own program's)")
    p.add_argument("--all", dest="explore_all", action="store_true",
                   help="keep exploring after a deviation; list every distinct one")
    p.add_argument("--strict-robustness", action="store_true",
                   help="robustness findings (misuse the target accepted silently) fail the "
                        "check too")
    p.add_argument("--disable-feature", action="append", default=[], metavar="NAME")
    p.add_argument("--max-examples", type=int, default=None)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--step-timeout", type=float, default=None, metavar="SECONDS",
                   help="per-step time limit (default $PREFIXCACHE_STEP_TIMEOUT or 10; "
                        "0 disables it)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also show pytest's own output")
    p.add_argument("--pytest-args", default="", metavar="ARGS",
                   help="extra pytest arguments (one string; shows pytest's output)")
    return p


def pytest_arguments(args: argparse.Namespace) -> list[str]:
    """The pytest command line for ``args`` (the machines of the target's family)."""
    chosen = families.select(args.allocator or os.environ.get(ENV_VAR), args.family)
    out = [str(chosen.machines), "-p", "no:cacheprovider", "--rootdir", str(SUITE_DIR),
           f"--hypothesis-profile={args.profile}"]
    if args.verbose or args.pytest_args:
        out += ["-v"] if args.verbose else []
    else:
        out += ["-o", "addopts=", "-p", "no:terminal"]
    for flag in ("allocator", "family", "allocator_type", "xfails_file", "write_xfails",
                 "max_examples", "max_steps", "step_timeout"):
        value = getattr(args, flag)
        if value is not None:
            out.append(f"--{flag.replace('_', '-')}={value}")
    if args.seed is not None:
        out.append(f"--hypothesis-seed={args.seed}")
    if args.explore_all:
        out.append("--all")
    if args.strict_xfails:
        out.append("--strict-xfails")
    out += [f"--disable-feature={f}" for f in args.disable_feature]
    return out + shlex.split(args.pytest_args)


def exit_status(code: int | pytest.ExitCode, target_line: str, conforming: bool) -> int:
    """0 conforms, 1 deviations, 2 usage or target error."""
    if code in _NO_VERDICT or target_line.startswith("cannot load target"):
        return EXIT_ERROR
    return EXIT_CONFORMS if conforming else EXIT_DEVIATIONS


def check(argv: Sequence[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    try:
        arguments = pytest_arguments(args)
        load_target(args.allocator, family=args.family, allocator_type=args.allocator_type,
                    disable=args.disable_feature, step_timeout=args.step_timeout)
    except (families.FamilyError, TargetError, ImportError) as exc:
        return not_run(args, f"{type(exc).__name__}: {exc}")
    collector = Collector()
    started = time.monotonic()
    code = pytest.main(arguments, plugins=[collector])
    seconds = time.monotonic() - started
    target_line = plugin._target_line()
    deviations = plugin.session_deviations()
    robust = plugin.session_robustness()
    failed = [t for t, r in collector.results.items() if r == "failed"]
    absorbed = absorbed_by_entry(plugin.load_expected(args.xfails_file),
                                 plugin.absorbed_mechanisms(), plugin.selected_family())
    wide = args.strict_xfails and any(row.too_wide for row in absorbed)
    conforming = not failed and not collector.errors and not deviations and not wide \
        and not (args.strict_robustness and robust)
    status = exit_status(code, target_line, conforming)
    if status == EXIT_ERROR:
        return not_run(args, f"no verdict (pytest exit status {int(code)}); target: "
                             f"{target_line}", collector)
    verdicts = family_verdicts(deviations, collector.expected)
    sys.stdout.write(render_absorbed(absorbed, args.strict_xfails))
    sys.stdout.write(render_terminal(deviations, collector, verdicts, conforming, seconds,
                                     robust))
    write_reports(args.report_dir, collector, deviations, target_line, conforming, seconds,
                  absorbed, robust)
    print(f"report: {args.report_dir / 'conformance.md'} and "
          f"{args.report_dir / 'conformance.json'}")
    if args.write_xfails and Path(args.write_xfails).is_file():
        entries = plugin.load_expected(args.write_xfails)
        flaky = [e.id for e in entries if e.flaky]
        print(f"xfails: {args.write_xfails}, {len(entries)} entries"
              + (f" ({len(flaky)} flaky: {', '.join(flaky)})" if flaky else "")
              + f"; adopt it with --xfails-file {args.write_xfails}")
    return status


def not_run(args: argparse.Namespace, why: str, collector: Collector | None = None) -> int:
    """No verdict: the target could not be loaded or built, or the suite did not run. Says
    why, prints no verdict rows and writes a report that says ``not run``; exit status 2."""
    print(f"prefixcache check: not run: {why}", file=sys.stderr)
    write_not_run(args.report_dir, why, collector)
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "check":
        print("usage: prefixcache check [--allocator module:callable] [options]; "
              "see prefixcache check --help", file=sys.stderr)
        return EXIT_ERROR
    return check(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
