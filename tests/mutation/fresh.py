"""Score the suite on a fresh sample of the *current* allocator's mutants.

The earlier samples (``sample_rerun.py``, ``heldout.py``) mutate the allocator of ``aa16ddd``,
which has changed since. This script samples mutants that mutmut generates from the allocator
as it is now, leaving out every mutant somebody already looked at: a fresh mutant is excluded
when its mutated function source is identical to that of an old mutant named in a ``--seen``
file (the old order's first 1175 positions, the helpers' dev subsets). The old order was a
uniform shuffle, so what remains is not biased towards easy or hard mutants.

Run inside a work directory where ``mutmut run "no-such-mutant*"`` generated ``mutants/``:

    python mutwork/fresh.py draw OUT_TABLE --n 400 --seed 20261201 \\
        --old /work/mut/rerun5/mutants --seen order.txt:1175 names.txt ... \\
        [--exclude EARLIER_SAMPLE_NAMES]
    python mutwork/fresh.py report TABLE --verdicts part00.tsv part01.tsv \\
        --equivalent equivalent.tsv

``draw`` writes one row per sampled mutant (``name, module, message flag, diff``); the names
go to ``rerun.py``. ``report`` gives the raw score, the score without equivalent mutants and
the behavioural score (without message-only mutants too, as in ``heldout.py``), each with a
95 % Wilson interval, and lists every survivor that the equivalence file does not explain.
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter
from pathlib import Path

from modules import MODULES
from sample_rerun import pct, wilson
from table import changes, function_bodies, is_message_only, mutated_body


def fingerprints(mutants: Path, names: set[str] | None = None) -> dict[str, str]:
    """Full mutant name -> its mutated function source (name suffixes removed)."""
    out: dict[str, str] = {}
    for module in MODULES:
        bodies = function_bodies(mutants / "prefixcache" / f"{module}.py")
        for short in bodies:
            if not re.search(r"__mutmut_\d+$", short):
                continue
            name = f"prefixcache.{module}.{short}"
            if names is None or name in names:
                out[name] = "\n".join(mutated_body(bodies, short)[1:])
    return out


def seen_names(specs: list[str]) -> set[str]:
    """Names from files given as ``PATH`` (every line) or ``PATH:N`` (the first N lines)."""
    out: set[str] = set()
    for spec in specs:
        path, _, count = spec.partition(":")
        lines = Path(path).read_text().split()
        out.update(lines[: int(count)] if count else lines)
    return out


def draw(args: argparse.Namespace) -> None:
    old = fingerprints(Path(args.old), seen_names(args.seen))
    seen = {(re.sub(r"__mutmut_\d+$", "", n), src) for n, src in old.items()}
    current = fingerprints(Path("mutants"))
    drawn = seen_names(args.exclude)
    fresh = sorted(
        n for n, src in current.items()
        if (re.sub(r"__mutmut_\d+$", "", n), src) not in seen and n not in drawn
    )
    sample = random.Random(args.seed).sample(fresh, args.n)
    print(f"{len(current)} mutants, {len(current) - len(fresh)} seen or drawn before, "
          f"sampled {args.n}")
    bodies = {m: function_bodies(Path("mutants/prefixcache") / f"{m}.py") for m in MODULES}
    rows = []
    for name in sample:
        module, short = name.split(".", 2)[1:]
        minus, plus, context = changes(bodies[module], short)
        flag = "message" if is_message_only(minus, plus, context) else ""
        diff = " | ".join(["- " + m for m in minus] + ["+ " + p for p in plus])
        rows.append("\t".join((name, module, flag, diff)))
    Path(args.table).write_text("\n".join(rows) + "\n")


def line(label: str, killed: int, counted: int) -> str:
    low, high = wilson(killed, counted)
    share = f"{pct(killed / counted)} ({pct(low)} to {pct(high)})"
    return f"| {label} | {killed} / {counted} | {share} |"


def report(args: argparse.Namespace) -> None:
    rows = [r.split("\t") for r in Path(args.table).read_text().splitlines()]
    killed: dict[str, bool] = {}
    for path in args.verdicts:
        for entry in Path(path).read_text().splitlines():
            name, code, _seconds = entry.split("\t")
            killed[name] = int(code) != 0
    equivalent = {}
    for entry in Path(args.equivalent).read_text().splitlines():
        if entry and not entry.startswith("#"):
            name, reason = entry.split("\t", 1)
            equivalent[name] = reason
    ran = [r for r in rows if r[0] in killed]
    # message-only: flagged by table.py, or classified C-MSG by hand in the equivalence file
    message = {r[0] for r in ran if r[2] == "message"
               or equivalent.get(r[0], "").startswith("C-MSG")}
    equivalent = {k: v for k, v in equivalent.items() if not v.startswith("C-MSG")}
    dead = sum(killed[r[0]] for r in ran)
    wrong = [r[0] for r in ran if killed[r[0]] and (r[0] in equivalent or r[0] in message)]
    if wrong:
        raise SystemExit(f"killed mutants classified as message-only or equivalent: {wrong}")
    eq = sum(r[0] in equivalent for r in ran)
    msg = len(message)
    print(f"{len(ran)} of {len(rows)} sampled mutants ran\n")
    print("| score | killed / counted | fraction (95 % Wilson) |\n|---|---|---|")
    print(line("raw (all mutants)", dead, len(ran)))
    print(line(f"without the {eq} equivalent", dead, len(ran) - eq))
    print(line(f"behavioural (without {msg} message-only and {eq} equivalent)", dead,
               len(ran) - eq - msg))
    print("\n| module | killed / behavioural |\n|---|---|")
    for module in MODULES:
        mine = [r for r in ran if r[1] == module and r[0] not in equivalent and r[0] not in message]
        if mine:
            print(f"| {module} | {sum(killed[r[0]] for r in mine)} / {len(mine)} |")
    real = [r for r in ran if not killed[r[0]] and r[0] not in equivalent and r[0] not in message]
    print(f"\nSurvivors that change behaviour ({len(real)}):")
    for r in real:
        print(f"- {r[0].split('.', 2)[2]}: {r[3]}")
    print("\nEquivalent, by reason:", dict(Counter(equivalent[r[0]].split(":")[0]
                                                  for r in ran if r[0] in equivalent)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("draw")
    d.add_argument("table")
    d.add_argument("--n", type=int, default=400)
    d.add_argument("--seed", type=int, default=20261201)
    d.add_argument("--old", required=True)
    d.add_argument("--seen", nargs="+", default=[])
    d.add_argument("--exclude", nargs="+", default=[],
                   help="names of this generation's mutants drawn by an earlier sample")
    r = sub.add_parser("report")
    r.add_argument("table")
    r.add_argument("--verdicts", nargs="+", required=True)
    r.add_argument("--equivalent", required=True)
    args = parser.parse_args()
    draw(args) if args.command == "draw" else report(args)


if __name__ == "__main__":
    main()
