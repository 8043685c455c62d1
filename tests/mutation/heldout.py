"""Score on a held-out sample: mutants nobody looked at while the suite was being improved.

Several rounds of suite work were aimed at the survivors of the first 575 mutants of the sample
order (``sample_rerun.py order``). Those are no longer a fair sample of what the suite kills, so
the score is measured on the next ``N`` of the same pre-drawn order (positions 576..575+N), run
by ``rerun.py`` (one forked ``pytest properties`` per mutant, mutation profile) against one or
two suites.

Two scores are given, both as the plain sample fraction with a 95 % Wilson interval and as a
module-stratified estimate (each module's fraction weighted by its share of the 2316 mutants):

- **raw**: killed / all sampled mutants (message-only and equivalent mutants count as survivors);
- **behavioural**: killed / (sampled - message-only - equivalent). Message-only mutants change
  only the text of an error message (``table.tsv`` flag ``message``): docs/API.md specifies error
  classes, not texts, so no target-neutral suite can kill them (cosmic-ray, the other tool
  considered, makes no string-literal mutants at all). Equivalent mutants are the survivors of a
  (b) group of ``labels.py`` (same observable behaviour for every input); the standard mutation
  score leaves them out of the denominator.

Usage: python heldout.py ORDER_FILE N OUT_TSV FINAL_TSV... [--base BASE_TSV...]
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from pathlib import Path

from labels import GROUPS
from report import group_of
from sample_rerun import MODULES, old_rows, paired_line, pct, wilson

#: The first 575 of the order directed the suite work.
TARGETED = 575


def verdicts(paths: list[Path]) -> dict[str, bool]:
    """Mutant key -> killed, from rerun.py output files (exit 0 survived; later files win)."""
    out: dict[str, bool] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            name, code, _seconds = line.split("\t")
            out[name] = int(code) != 0
    return out


def old_group(row: list[str]) -> str:
    """The ``labels.py`` group of an old-run survivor; "" for a mutant the old suite killed."""
    return group_of(row[0], row[1], row[3], row[2]) if row[2] != "killed" else ""


def kind(row: list[str], killed: bool) -> str:
    """'killed', 'message', 'equivalent' or 'survived' (a real gap) for one mutant."""
    if killed:
        return "killed"
    if row[3] == "message":
        return "message"
    return "equivalent" if GROUPS.get(old_group(row), ("",))[0] == "b" else "survived"


def stratified(per_module: dict[str, Counter[str]], sizes: Counter[str],
               behavioural: bool) -> tuple[float, float]:
    """Module-stratified estimate and its standard error: each module's kill fraction weighted
    by the estimated population share of the mutants the score counts in that module."""
    total = sum(sizes.values())
    num = den = var = 0.0
    for module, c in per_module.items():
        sampled = sum(c.values())
        n = c["killed"] + c["survived"] + (0 if behavioural else c["message"] + c["equivalent"])
        if n == 0:
            continue
        w = sizes[module] / total * n / sampled
        p = c["killed"] / n
        num += w * p
        den += w
        var += w * w * p * (1 - p) / max(n - 1, 1)
    return num / den, math.sqrt(var) / den


def summary(name: str, rows: dict[str, list[str]], keys: list[str], killed: dict[str, bool],
            sizes: Counter[str]) -> list[str]:
    per_module: dict[str, Counter[str]] = {m: Counter() for m in MODULES}
    for key in keys:
        per_module[rows[key][0]][kind(rows[key], killed[key])] += 1
    total: Counter[str] = sum(per_module.values(), Counter())
    lines = [f"### {name}: {len(keys)} held-out mutants: " + ", ".join(
        f"{k} {total[k]}" for k in ("killed", "survived", "message", "equivalent"))]
    for label, behavioural in (("raw", False), ("behavioural", True)):
        n = total["killed"] + total["survived"] + (
            0 if behavioural else total["message"] + total["equivalent"])
        lo, hi = wilson(total["killed"], n)
        est, se = stratified(per_module, sizes, behavioural)
        lines.append(f"- {label}: {total['killed']}/{n} = {pct(total['killed'] / n)} "
                     f"(95 % Wilson {pct(lo)} to {pct(hi)}); module-stratified {pct(est)} "
                     f"({pct(est - 1.96 * se)} to {pct(est + 1.96 * se)})")
    lines.append("- per module (killed / behavioural / sampled): " + "; ".join(
        f"{m} {c['killed']}/{c['killed'] + c['survived']}/{sum(c.values())}"
        for m, c in per_module.items()))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("order", type=Path)
    parser.add_argument("n", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("final", type=Path, nargs="+")
    parser.add_argument("--base", type=Path, nargs="*", default=[])
    args = parser.parse_args()
    rows = old_rows()
    sizes = Counter(row[0] for row in rows.values())
    keys = args.order.read_text().split()[TARGETED:TARGETED + args.n]
    final = verdicts(args.final)
    missing = [k for k in keys if k not in final]
    if missing:
        raise SystemExit(f"{len(missing)} held-out mutants have no verdict, e.g. {missing[0]}")
    lines = summary("final suite", rows, keys, final, sizes)
    table = ["module\tmutant\told_status\tflag\tgroup\tfinal" + ("\tbase" if args.base else "")]
    base = verdicts(args.base) if args.base else {}
    for key in keys:
        row = rows[key]
        cells = [row[0], row[1], row[2], row[3], old_group(row), kind(row, final[key])]
        if base:
            cells.append(kind(row, base[key]))
        table.append("\t".join(cells))
    if base:
        lines += summary("base suite", rows, keys, base, sizes)
        b = [base[k] for k in keys]
        f = [final[k] for k in keys]
        lines.append("- paired: " + paired_line("base", "final", b, f))
    survivors = Counter(old_group(rows[k]) or "killed by the old suite"
                        for k in keys if kind(rows[k], final[k]) == "survived")
    lines.append("- real survivors by group: " + ", ".join(
        f"{g} {c}" for g, c in survivors.most_common()))
    args.out.write_text("\n".join(table) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
