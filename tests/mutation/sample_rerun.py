"""Sampled re-run of the aa16ddd mutants with a newer suite: sample order and paired report.

The sample is uniform over all mutants of the six fully run modules (``results/table.tsv``
order, ``random.Random(2026)`` permutation); running a prefix of the permutation gives a
uniform sample of that size. Old verdicts come from ``results/table.tsv`` (never-executed and
message-only mutants count as not killed, as in the old score); new verdicts from mutmut's
``mutants/prefixcache/*.py.meta`` of the re-run work directory.

Usage (from the re-run work directory):
    python sample_rerun.py order ORDER_FILE
    python sample_rerun.py report ORDER_FILE N [OUT_TSV] [--previous PREV_TSV]
        [--executed-before PREV_MUTWORK --never-out NEVER_TSV]
``report`` reads ``mutwork/executed_<module>.txt`` (plan.py on coverage of the new suite) and
prints the markdown tables of the README section. ``--previous`` adds an earlier re-run's
per-mutant verdicts (its OUT_TSV) as a third column, paired with the other two;
``--executed-before`` (the earlier re-run's ``mutwork/``) lists, over all 2316 mutants, which
of the old run's never-executed mutants each suite executes, into NEVER_TSV.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections import Counter
from pathlib import Path

from modules import FULLY_RUN
from report import group_of

HERE = Path(__file__).resolve().parent
TABLE = HERE / "results" / "table.tsv"
SEED = 2026
MODULES = FULLY_RUN
NEW_STATUS = {0: "survived", 1: "killed", 3: "killed", 33: "no_tests", 5: "no_tests"}
TIMEOUT_CODES = {36, 24, -24, 152, 255}


def old_rows() -> dict[str, list[str]]:
    """Full mutant key -> table.tsv row, six fully run modules only."""
    rows: dict[str, list[str]] = {}
    for line in TABLE.read_text().splitlines():
        row = line.split("\t")
        if row[0] in MODULES:
            rows[f"prefixcache.{row[0]}.{row[1]}"] = row
    return rows


def write_order(path: Path) -> None:
    population = list(old_rows())
    if len(population) != 2316:
        raise SystemExit(f"expected 2316 mutants in the six modules, found {len(population)}")
    order = random.Random(SEED).sample(population, len(population))
    path.write_text("".join(k + "\n" for k in order))


def new_status(codes: dict[str, int | None], key: str) -> str:
    code = codes.get(key)
    if code is None:
        return "not_run"
    if code in TIMEOUT_CODES:
        return "timeout"
    return NEW_STATUS.get(code, f"other_{code}")


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial proportion k/n."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b vs c discordant pairs."""
    n = b + c
    if n == 0:
        return 1.0
    tail: float = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def read_codes(workdir: Path) -> dict[str, int | None]:
    """mutmut's exit code per mutant key, from the re-run work directory's meta files."""
    codes: dict[str, int | None] = {}
    for meta in (workdir / "mutants" / "prefixcache").glob("*.py.meta"):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


def read_executed(mutwork: Path) -> set[str]:
    """Keys of the mutants whose change the suite executes (``plan.py`` output in MUTWORK)."""
    executed: set[str] = set()
    for m in MODULES:
        executed.update((mutwork / f"executed_{m}.txt").read_text().split())
    return executed


def read_previous(tsv: Path) -> dict[str, tuple[str, bool]]:
    """Key -> (verdict, executed) of an earlier re-run's per-mutant tsv (this script's output)."""
    out: dict[str, tuple[str, bool]] = {}
    for line in tsv.read_text().splitlines()[1:]:
        module, short, _old, _group, status, executed = line.split("\t")
        out[f"prefixcache.{module}.{short}"] = (status, executed == "yes")
    return out


def is_kill(status: str) -> bool:
    return status in ("killed", "timeout")


def paired_line(name_a: str, name_b: str, a: list[bool], b: list[bool]) -> str:
    """Paired comparison of two suites' verdicts over the same mutants."""
    n = len(a)
    both = sum(x and y for x, y in zip(a, b, strict=True))
    neither = sum(not x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    d = (only_b - only_a) / n
    se = math.sqrt(only_a + only_b - (only_b - only_a) ** 2 / n) / n
    return (
        f"{name_b} vs {name_a}: both killed {both}, neither {neither}, "
        f"{name_b} only {only_b}, {name_a} only {only_a}; difference {pct(d)} "
        f"(95 % CI {pct(d - 1.96 * se)} to {pct(d + 1.96 * se)}), "
        f"exact McNemar p = {mcnemar_exact(only_a, only_b):.2g}"
    )


def wilson_cell(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k} ({pct(k / n)}; {pct(lo)} to {pct(hi)})"


def report(
    order_file: Path,
    n: int,
    out: Path,
    previous: Path | None = None,
    executed_before: Path | None = None,
    never_out: Path | None = None,
) -> None:
    """Paired tables of the old suite, an optional earlier re-run and this re-run.

    Run from the re-run work directory (mutmut's ``mutants/`` and ``mutwork/`` are read there).
    """
    rows = old_rows()
    sample = order_file.read_text().split()[:n]
    codes = read_codes(Path("."))
    executed = read_executed(Path("mutwork"))
    prev = read_previous(previous) if previous else {}
    lines = ["module\tmutant\told_status\told_group\tnew_status\tnew_executed"]
    per_module: dict[str, Counter[str]] = {m: Counter() for m in MODULES}
    old_v: list[bool] = []
    prev_v: list[bool] = []
    new_v: list[bool] = []
    never: Counter[str] = Counter()
    gained: Counter[str] = Counter()
    regressions: list[str] = []
    sampled_status: dict[str, str] = {}
    for key in sample:
        row = rows[key]
        module, short, old, flag = row[0], row[1], row[2], row[3]
        new = new_status(codes, key)
        if new == "not_run":
            raise SystemExit(f"{key} is in the first {n} of the order but was not run")
        sampled_status[key] = new
        old_k, new_k = old == "killed", is_kill(new)
        group = "" if old_k else group_of(module, short, flag, old)
        is_exec = key in executed
        lines.append(f"{module}\t{short}\t{old}\t{group}\t{new}\t{'yes' if is_exec else 'no'}")
        cnt = per_module[module]
        cnt["n"] += 1
        cnt["old"] += old_k
        cnt["new"] += new_k
        cnt["timeout"] += new == "timeout"
        cnt["gain"] += new_k and not old_k
        cnt["loss"] += old_k and not new_k
        old_v.append(old_k)
        new_v.append(new_k)
        if prev:
            prev_k = is_kill(prev[key][0])
            prev_v.append(prev_k)
            cnt["prev"] += prev_k
            if prev_k and not new_k:
                regressions.append(f"{module}.{short} ({new})")
        if old == "unexecuted":
            never["n"] += 1
            never["executed"] += is_exec
            never["killed"] += new_k
            if prev:
                never["prev_executed"] += prev[key][1]
                never["prev_killed"] += is_kill(prev[key][0])
        if new_k and not old_k:
            gained[group] += 1
    out.write_text("\n".join(lines) + "\n")

    columns = [("old suite (table.tsv)", old_v)]
    if prev:
        columns.append(("previous re-run", prev_v))
    columns.append(("this re-run", new_v))
    print(f"sample n={n}, first {n} of random.Random({SEED}).sample(all 2316, 2316)\n")
    print("| suite | killed | fraction | 95 % Wilson | x 2316 mutants |")
    print("|---|---|---|---|---|")
    for label, verdicts in columns:
        k = sum(verdicts)
        lo, hi = wilson(k, n)
        print(
            f"| {label} | {k} of {n} | {pct(k / n)} | {pct(lo)} to {pct(hi)} | "
            f"{round(2316 * lo)} to {round(2316 * hi)} |"
        )
    print()
    print("- " + paired_line("old", "this", old_v, new_v))
    if prev:
        print("- " + paired_line("previous", "this", prev_v, new_v))
        print("- " + paired_line("old", "previous", old_v, prev_v))
    print()
    # The exact old score of every module is known (table.tsv), so per module the exact old
    # score plus the sample's paired difference, weighted by module size, uses more than the
    # sample (a stratified difference estimator); the plain stratified estimate is shown too.
    sizes = Counter(r[0] for r in rows.values())
    exact_old = Counter(r[0] for r in rows.values() if r[2] == "killed")
    strat = strat_var = diff = diff_var = 0.0
    for m in MODULES:
        cm = per_module[m]
        if not cm["n"]:
            continue
        w, nm = sizes[m] / len(rows), cm["n"]
        p = cm["new"] / nm
        strat += w * p
        strat_var += w * w * p * (1 - p) / nm
        gain, loss = cm["gain"], cm["loss"]
        dm = (gain - loss) / nm
        diff += w * (exact_old[m] / sizes[m] + dm)
        diff_var += w * w * (gain + loss - (gain - loss) ** 2 / nm) / nm**2
    for label, est, v in (
        (
            "stratified difference estimate (exact old + paired difference per module)",
            diff,
            diff_var,
        ),
        ("module-stratified estimate of the new score", strat, strat_var),
    ):
        half = 1.96 * math.sqrt(v)
        print(f"{label}: {pct(est)} (95 % CI {pct(est - half)} to {pct(est + half)})")
    if prev:
        est, half = chained_estimate(rows, prev, per_module, prev_v, new_v, sample)
        print(
            "chained estimate (exact old + previous-vs-old difference on the whole earlier "
            "sample + this-vs-previous difference on this sample, per module): "
            f"{pct(est)} (95 % CI {pct(est - half)} to {pct(est + half)}, conservative)"
        )
    print(f"exact old score over all {len(rows)}: {pct(sum(exact_old.values()) / len(rows))}\n")
    heads = ["killed old"] + (["killed previous"] if prev else []) + ["killed this"]
    print("| module | sampled | " + " | ".join(heads) + " | this re-run timeouts |")
    print("|---" * (len(heads) + 3) + "|")
    for m in MODULES:
        cm = per_module[m]
        if cm["n"]:
            keys = ["old"] + (["prev"] if prev else []) + ["new"]
            cells = " | ".join(wilson_cell(cm[k], cm["n"]) for k in keys)
            print(f"| {m} | {cm['n']} | {cells} | {cm['timeout']} |")
    print("\n(cells: killed (fraction; 95 % Wilson interval))\n")
    text = f"old never-executed in sample: {never['n']}"
    if prev:
        text += (
            f"; previous re-run: executed {never['prev_executed']}, killed {never['prev_killed']}"
        )
    print(text + f"; this re-run: executed {never['executed']}, killed {never['killed']}")
    print("newly killed by old group: " + ", ".join(f"{g} {k}" for g, k in gained.most_common()))
    if prev:
        print(f"killed by the previous re-run, not by this one ({len(regressions)}):")
        for r in regressions:
            print(f"  {r}")
    if executed_before is not None and never_out is not None:
        never_executed_changes(rows, executed_before, executed, sampled_status, prev, never_out)


def paired_difference(counts: Counter[str], n: int) -> tuple[float, float]:
    """Paired difference in kill rate (gains minus losses over n) and its variance."""
    if not n:
        return 0.0, 0.0
    gain, loss = counts["gain"], counts["loss"]
    return (gain - loss) / n, (gain + loss - (gain - loss) ** 2 / n) / n**2


def chained_estimate(
    rows: dict[str, list[str]],
    prev: dict[str, tuple[str, bool]],
    per_module: dict[str, Counter[str]],
    prev_v: list[bool],
    new_v: list[bool],
    sample: list[str],
) -> tuple[float, float]:
    """Score estimate over all 2316 that also uses the earlier re-run's larger sample.

    Per module: exact old score + (earlier re-run - old) paired difference over the earlier
    sample + (this - earlier re-run) paired difference over this sample, weighted by module
    size. The two samples overlap (this one is a prefix of the earlier one), so the 95 %
    half-width is the sum of the two differences' half-widths (a bound, not an equality).
    """
    sizes = Counter(r[0] for r in rows.values())
    exact_old = Counter(r[0] for r in rows.values() if r[2] == "killed")
    earlier: dict[str, Counter[str]] = {m: Counter() for m in MODULES}
    for key, (status, _executed) in prev.items():
        row = rows[key]
        old_k, prev_k = row[2] == "killed", is_kill(status)
        cm = earlier[row[0]]
        cm["n"] += 1
        cm["gain"] += prev_k and not old_k
        cm["loss"] += old_k and not prev_k
    later: dict[str, Counter[str]] = {m: Counter() for m in MODULES}
    for key, prev_k, new_k in zip(sample, prev_v, new_v, strict=True):
        cm = later[rows[key][0]]
        cm["gain"] += new_k and not prev_k
        cm["loss"] += prev_k and not new_k
    est = var_earlier = var_later = 0.0
    for m in MODULES:
        w = sizes[m] / len(rows)
        d_earlier, v_earlier = paired_difference(earlier[m], earlier[m]["n"])
        d_later, v_later = paired_difference(later[m], per_module[m]["n"])
        est += w * (exact_old[m] / sizes[m] + d_earlier + d_later)
        var_earlier += w * w * v_earlier
        var_later += w * w * v_later
    return est, 1.96 * (math.sqrt(var_earlier) + math.sqrt(var_later))


def never_executed_changes(
    rows: dict[str, list[str]],
    executed_before: Path,
    executed: set[str],
    sampled_status: dict[str, str],
    prev: dict[str, tuple[str, bool]],
    out: Path,
) -> None:
    """Exact (coverage, all 2316) executed-status changes of the old never-executed mutants.

    Writes one row per mutant the old run never executed and the earlier or this suite
    executes, with the verdicts of the sampled ones; prints the counts per module.
    """
    before = read_executed(executed_before)
    lines = ["module\tmutant\told_group\texecuted_previous\texecuted_now\tprevious\tnow"]
    per: dict[str, Counter[str]] = {m: Counter() for m in MODULES}
    for key, row in rows.items():
        module, short = row[0], row[1]
        was, now = key in before, key in executed
        cm = per[module]
        if row[2] == "unexecuted":
            cm["never"] += 1
            cm["prev"] += was
            cm["now"] += now
            cm["new_now"] += now and not was
            if was or now:
                lines.append(
                    f"{module}\t{short}\t{group_of(module, short, row[3], row[2])}\t"
                    f"{'yes' if was else 'no'}\t{'yes' if now else 'no'}\t"
                    f"{prev[key][0] if key in prev else '-'}\t{sampled_status.get(key, '-')}"
                )
        cm["exec_before"] += was
        cm["exec_now"] += now
        cm["lost"] += was and not now
        cm["old_exec_lost"] += row[2] != "unexecuted" and not now
    out.write_text("\n".join(lines) + "\n")
    print(
        "\n| module | old never executed | executed by previous | executed now | "
        "newly executed now | executed previous -> now | old-executed not executed now |"
    )
    print("|---|---|---|---|---|---|---|")
    total: Counter[str] = Counter()
    for m in MODULES:
        cm = per[m]
        total.update(cm)
        print(
            f"| {m} | {cm['never']} | {cm['prev']} | {cm['now']} | {cm['new_now']} | "
            f"{cm['exec_before']} -> {cm['exec_now']} | {cm['old_exec_lost']} |"
        )
    print(
        f"| total | {total['never']} | {total['prev']} | {total['now']} | {total['new_now']} | "
        f"{total['exec_before']} -> {total['exec_now']} | {total['old_exec_lost']} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    order = sub.add_parser("order")
    order.add_argument("order_file", type=Path)
    rep = sub.add_parser("report")
    rep.add_argument("order_file", type=Path)
    rep.add_argument("n", type=int)
    rep.add_argument("out", type=Path, nargs="?", default=HERE / "results" / "sample_rerun.tsv")
    rep.add_argument("--previous", type=Path, help="per-mutant tsv of an earlier re-run")
    rep.add_argument(
        "--executed-before", type=Path, help="mutwork/ of the earlier re-run (plan.py output)"
    )
    rep.add_argument("--never-out", type=Path, help="tsv of the old never-executed changes")
    args = parser.parse_args()
    if args.cmd == "order":
        write_order(args.order_file)
    else:
        report(
            args.order_file, args.n, args.out, args.previous, args.executed_before, args.never_out
        )


if __name__ == "__main__":
    main()
