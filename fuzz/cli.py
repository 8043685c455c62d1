"""``python -m fuzz``: run harnesses, turn crashes into regression tests, and the tools a
family offers: replay traces, measure the zoo, re-record traces.

``--family NAME`` (before or after the subcommand; default: the family of ``--allocator``,
else the registry's default) picks the allocator family from the registry
(``properties.core.family``). This module names no family. Fuzz inputs become programs through
the family's own Hypothesis machines (:mod:`fuzz.core.machine_harness`; a harness level is a
machine), so the machines' generator is the fuzzer's too: ``run``, ``regress`` and ``zoo``
work for every family with machines; ``replay``, ``traces`` and ``zoo`` for a family that takes
the matching role of :mod:`fuzz.core.tools` (``Traces``, ``Zoo``); for a family without it they
exit 2 naming the subcommands it has.

    python -m fuzz [--family NAME] run [LEVEL] [--allocator SPEC] [--time SECONDS] [--seed N]
                            [--corpus DIR] [--engine auto|builtin|atheris] [--runs N]
                            [--artifacts DIR] [--weak-hash] [--stop-on-failure]
    python -m fuzz regress INPUT --name NAME [--harness LEVEL] [--allocator SPEC]
                            [--config KEY=VALUE ...] [--out-dir DIR] [--minimize]
    python -m fuzz replay TRACE.jsonl ... [--allocator SPEC]
    python -m fuzz zoo [--seconds 60] [--seed N] [--only NAME ...] [--harness LEVEL]
    python -m fuzz traces [--out DIR]               (default: the family's traces folder)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fuzz.core.engine import Engine, Failure, minimize
from fuzz.core.execution import Execution
from fuzz.core.harness import ARTIFACTS_VAR, HASH_MODE_VAR, quiet_target_logs
from fuzz.core.instrumentation import atheris_module
from fuzz.core.machine_harness import MachineHarness, harness_for
from fuzz.core.progress import Progress
from fuzz.core.regress import Regression
from fuzz.core.tools import Traces, Zoo, subcommands
from fuzz.core.zoo import run_zoo
from properties.core import family as families
from properties.core.family import Family, FamilyError
from properties.core.targets import ENV_VAR, Target, load_target

REPO_DIR = Path(__file__).resolve().parents[1]


def chosen_family(args: argparse.Namespace) -> Family:
    """``--family`` if given, else the family of ``--allocator`` (or
    ``$PREFIXCACHE_ALLOCATOR``), else the default; an unknown name is a :class:`FamilyError`
    listing the known ones."""
    spec = getattr(args, "allocator", None) or os.environ.get(ENV_VAR)
    return families.select(spec, args.family)


# --------------------------------------------------------------------------- run


def _report_failure(harness: MachineHarness, artifacts: Path,
                    failure: Failure[Execution]) -> Path:
    path = harness.write_crash(failure.data, failure.result, artifacts)
    result = failure.result
    sidecar = path.with_suffix(".json").name
    follow = (f"regression test: python -m fuzz --family {harness.target.family} regress "
              f"{path} --name <name> (the sidecar holds the program and its shape)")
    print(f"\n[{harness.name}] VIOLATION after {failure.execs} executions "
          f"({failure.seconds:.1f}s)\n{result.violation}\n\n"
          f"{harness.listing(result)}\n\n"
          f"crash input: {path}  (sidecar {sidecar})\n{follow}\n", flush=True)
    return path


def read_corpus(directory: Path) -> list[bytes]:
    """Every file of ``directory`` (none if it is missing), in name order (deterministic)."""
    if not directory.is_dir():
        return []
    return [p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()]


def run_builtin(harness: MachineHarness, *, seconds: float | None, runs: int | None,
                seed: int, corpus: Path | None, artifacts: Path, stop_on_failure: bool,
                progress: Progress | None) -> Engine[Execution]:
    """The built-in engine over ``harness``: from the inputs kept in ``corpus``, else seeded
    random inputs."""
    seeds = (read_corpus(corpus) if corpus else []) or harness.seeds(seed)
    engine = Engine(harness.run, seeds, seed=seed, corpus_dir=corpus,
                    on_failure=lambda f: _report_failure(harness, artifacts, f),
                    progress=progress)
    engine.fuzz(seconds=seconds, max_execs=runs, stop_on_failure=stop_on_failure)
    return engine


def run_atheris(harness: MachineHarness, args: argparse.Namespace, artifacts: Path) -> int:
    """``harness`` under atheris/libFuzzer in a child process (atheris owns the process), over a
    work corpus, with libFuzzer's flags."""
    name = harness.name
    entry = [sys.executable, "-m", "fuzz.core.machine_harness", "--family", str(harness.family),
             "--level", name]
    work = Path(args.corpus) if args.corpus else Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    work.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    cmd = [*entry, str(work), f"-seed={args.seed + 1}",
           f"-artifact_prefix={artifacts}/", "-print_final_stats=1"]
    if args.time:
        cmd.append(f"-max_total_time={int(args.time)}")
    if args.runs:
        cmd.append(f"-runs={args.runs}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO_DIR), os.environ.get("PYTHONPATH", "")) if p))
    env[ARTIFACTS_VAR] = str(artifacts)
    if args.allocator:
        env[ENV_VAR] = args.allocator
    if harness.weak_hash:
        env[HASH_MODE_VAR] = "weak"
    print(f"[{name}] atheris: {' '.join(cmd)}", flush=True)
    return subprocess.call(cmd, env=env)


def cmd_run(args: argparse.Namespace) -> int:
    quiet_target_logs()
    family = chosen_family(args)
    try:
        harness = harness_for(args.name, spec=args.allocator, family=family.name,
                              weak_hash=args.weak_hash)
        if args.weak_hash:
            harness.target  # noqa: B018  (a level without a weak-hash mode is refused here)
    except ValueError as why:
        print(f"python -m fuzz run: {why} (family {family.name})", file=sys.stderr)
        return 2
    artifacts = Path(args.artifacts)
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if atheris_module() is not None else "builtin"
    if engine == "atheris":
        if atheris_module() is None:
            print("atheris is not installed (pip install 'prefixcache[fuzz]')", file=sys.stderr)
            return 2
        return run_atheris(harness, args, artifacts)
    weak = " with the weak hash injected" if harness.weak_hash else ""
    print(f"[{harness.name}] engine: built-in (seed {args.seed}, machine route); target: "
          f"{harness.target.describe()}{weak}", flush=True)
    result = run_builtin(harness, seconds=args.time, runs=args.runs, seed=args.seed,
                         corpus=Path(args.corpus) if args.corpus else None,
                         artifacts=artifacts, stop_on_failure=args.stop_on_failure,
                         progress=Progress(harness.name, interval=args.report_every))
    stats = result.stats
    print(f"[{harness.name}] {stats.execs} executions in {stats.seconds:.1f}s "
          f"({stats.execs / max(stats.seconds, 1e-9):.1f}/s), corpus {stats.corpus}, "
          f"features {stats.features}, failures {len(stats.failures)} "
          f"({len(result.signatures)} distinct), programs ended early {stats.stopped_early}")
    return 1 if stats.failures else 0


# --------------------------------------------------------------------------- regress


def cmd_regress(args: argparse.Namespace) -> int:
    from fuzz.core.regress import (
        harness_from_name,
        harness_levels,
        load,
        program_listing,
        write_test,
    )

    quiet_target_logs()
    family = chosen_family(args)
    target = load_target(args.allocator, family=family.name)
    path = Path(args.input)
    try:
        shape = geometry(args.config)
    except ValueError as why:
        print(f"python -m fuzz regress: {why}", file=sys.stderr)
        return 2
    known = harness_levels(family)
    if args.harness is not None and args.harness not in known:
        print(f"python -m fuzz regress: family {family.name} has no harness {args.harness!r}; "
              f"known: {', '.join(known) or 'none'}", file=sys.stderr)
        return 2
    try:
        reg = load(path, target, harness=args.harness, shape=shape)
    except (KeyError, TypeError) as why:  # no shape, or another family's
        print(f"python -m fuzz regress: {path} has no pool shape of family {family.name} "
              f"({type(why).__name__}: {why}); give --config KEY=VALUE for each field of its "
              f"geometry, {{\"config\": ..., \"program\": ...}} or the crash file's sidecar",
              file=sys.stderr)
        return 2
    except ValueError as why:  # a raw input that runs no operation
        print(f"python -m fuzz regress: {why}", file=sys.stderr)
        return 2
    if args.minimize and reg.violation and path.suffix != ".json":
        default = args.harness or known[0]
        reg = _minimized(path, target, harness_from_name(path, default, family.name), reg)
    print(program_listing(family, reg.config, reg.program, reg.outcomes))
    print(f"\nagainst {target.describe()}:\n{reg.violation or 'no violation'}\n")
    out = write_test(args.name, reg, Path(args.out_dir))
    print(f"wrote {out}")
    return 0


def geometry(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as a geometry (the family's JSON pool shape): each value read as
    JSON, else kept as a string; a pair without ``=`` is a ``ValueError``."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--config takes KEY=VALUE, not {pair!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def _minimized(path: Path, target: Target, name: str, reg: Regression) -> Regression:
    """The crash input shrunk (same family), run again into a shorter program."""
    from fuzz.core.regress import harness_named

    family = target.family_object
    harness = harness_named(family, name).bind(target)
    first = harness.run(path.read_bytes())
    if first.violation is None:
        return reg
    broken = first.violation.family

    def still_fails(data: bytes) -> bool:
        v = harness.run(data).violation
        return v is not None and v.family == broken

    small = minimize(path.read_bytes(), still_fails)
    result = harness.run(small)
    return Regression(family.vocabulary.geometry(result.config), result.program,
                      f"{reg.source}, minimized to {len(small)} bytes", result.outcomes,
                      None if result.violation is None else str(result.violation), family.name)


# --------------------------------------------------------------------------- family tools


def refused(command: str, family: Family, role: type) -> int:
    """Exit code 2, after saying that ``family`` does not take ``role`` (what ``command``
    needs) and which subcommands it has."""
    print(f"python -m fuzz {command}: family {family.name} does not offer it (no "
          f"{role.__module__}.{role.__name__} role); its subcommands: "
          f"{', '.join(subcommands(family))}", file=sys.stderr)
    return 2


def cmd_replay(args: argparse.Namespace) -> int:
    family = chosen_family(args)
    if not isinstance(family, Traces):
        return refused("replay", family, Traces)
    quiet_target_logs()
    target = load_target(args.allocator, family=family.name)
    failed = unreadable = 0
    for name in args.trace:
        try:
            result = family.replay_trace(Path(name), target)
        except (OSError, ValueError) as why:
            print(f"{name}: not a trace of family {family.name}: {why}", file=sys.stderr)
            unreadable += 1
            continue
        verdict = "ok" if result.ok else "FAILED"
        print(f"{name}: {verdict}: {result.steps}/{result.total} steps against "
              f"{target.describe()}")
        for problem in result.problems:
            print(f"  {problem}")
        failed += not result.ok
    return 2 if unreadable else 1 if failed else 0


def cmd_traces(args: argparse.Namespace) -> int:
    family = chosen_family(args)
    if not isinstance(family, Traces):
        return refused("traces", family, Traces)
    quiet_target_logs()
    out = Path(args.out) if args.out else family.traces_dir
    for path, steps in family.record_traces(out):
        print(f"{path}: {steps} steps")
    return 0


def cmd_zoo(args: argparse.Namespace) -> int:
    family = chosen_family(args)
    if not isinstance(family, Zoo):
        return refused("zoo", family, Zoo)
    quiet_target_logs()
    try:
        return run_zoo(family, seconds=args.seconds, seed=args.seed, only=args.only,
                       level=args.harness)
    except ValueError as why:
        print(f"python -m fuzz zoo: {why}", file=sys.stderr)
        return 2


def _family_option(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument("--family", default=default, metavar="NAME",
                   help="allocator family (" + ", ".join(families.names()) + "; default: the "
                   "family of --allocator, else " + families.DEFAULT_FAMILY + ")")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    _family_option(p, None)
    # after the subcommand too; SUPPRESS keeps a value given before it
    common = argparse.ArgumentParser(add_help=False)
    _family_option(common, argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="fuzz one harness", parents=[common])
    run.add_argument("name", nargs="?", default=None,
                     help="the family's harness level (one of its machines); default: the "
                     "family's first")
    run.add_argument("--allocator", default=None, help="target spec module:callable")
    run.add_argument("--time", type=float, default=60.0, help="seconds (0: no limit)")
    run.add_argument("--runs", type=int, default=None, help="stop after N executions")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--corpus", default=None, help="directory to keep new inputs in")
    run.add_argument("--engine", choices=("auto", "builtin", "atheris"), default="auto")
    run.add_argument("--artifacts", default="fuzz-artifacts", help="crash file directory")
    run.add_argument("--weak-hash", action="store_true",
                     help="a level with a weak-hash mode only (the family's WeakHashing "
                     "role): inject a weak hash into the bundled allocator")
    run.add_argument("--stop-on-failure", action="store_true")
    run.add_argument("--report-every", type=float, default=5.0, help="seconds between lines")
    run.set_defaults(func=cmd_run)

    reg = sub.add_parser("regress", help="crash file or program JSON -> regression test",
                         parents=[common])
    reg.add_argument("input")
    reg.add_argument("--name", required=True)
    reg.add_argument("--harness", default=None, help="the family's harness level")
    reg.add_argument("--allocator", default=None,
                     help="the target the input failed on (decoding follows its responses)")
    reg.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                     help="a field of the pool shape of a plain program list (the family's "
                     "geometry, as in a crash file's sidecar); once per field")
    reg.add_argument("--out-dir", default=str(REPO_DIR / "tests" / "regressions"))
    reg.add_argument("--minimize", action="store_true", help="shrink a crash input first")
    reg.set_defaults(func=cmd_regress)

    rep = sub.add_parser("replay", help="replay traces against the model and a target",
                         parents=[common])
    rep.add_argument("trace", nargs="+")
    rep.add_argument("--allocator", default=None, help="target spec module:callable")
    rep.set_defaults(func=cmd_replay)

    zoo = sub.add_parser("zoo", help="time to first failure for every zoo mutant",
                         parents=[common])
    zoo.add_argument("--seconds", type=float, default=60.0)
    zoo.add_argument("--seed", type=int, default=0)
    zoo.add_argument("--harness", default=None, metavar="LEVEL",
                     help="one machine for every mutant (default: the machines each mutant "
                     "names, else the family's first)")
    zoo.add_argument("--only", nargs="*", default=None, metavar="MUTANT")
    zoo.set_defaults(func=cmd_zoo)

    tr = sub.add_parser("traces", help="re-record the shipped traces", parents=[common])
    tr.add_argument("--out", default=None, metavar="DIR",
                    help="where to write them (default: the family's traces folder)")
    tr.set_defaults(func=cmd_traces)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "time", None) == 0:
        args.time = None
    if args.family is not None:
        try:
            families.by_name(args.family)
        except FamilyError as why:
            print(f"python -m fuzz: {why}", file=sys.stderr)
            return 2
    code: int = args.func(args)
    return code
