"""Sampled re-run of the aa16ddd mutants with a newer suite: sample order and paired report.

The sample is uniform over all mutants of the six fully run modules (``results/table.tsv``
order, ``random.Random(2026)`` permutation); running a prefix of the permutation gives a
uniform sample of that size. Old verdicts come from ``results/table.tsv`` (never-executed and
message-only mutants count as not killed, as in the old score); new verdicts from mutmut's
``mutants/prefixcache/*.py.meta`` of the re-run work directory.

Usage (from the re-run work directory):
    python sample_rerun.py order ORDER_FILE
    python sample_rerun.py report ORDER_FILE N [OUT_TSV]
``report`` reads ``mutwork/executed_<module>.txt`` (plan.py on coverage of the new suite) and
prints the markdown tables of the README section.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections import Counter
from pathlib import Path

from report import group_of

HERE = Path(__file__).resolve().parent
TABLE = HERE / "results" / "table.tsv"
SEED = 2026
MODULES = [
    "prefix_caching_block",
    "evictor",
    "block_table",
    "cpu_gpu_block_allocator",
    "naive_block",
    "common",
]
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


def report(order_file: Path, n: int, out: Path) -> None:
    rows = old_rows()
    sample = order_file.read_text().split()[:n]
    codes: dict[str, int | None] = {}
    for meta in Path("mutants/prefixcache").glob("*.py.meta"):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    executed: set[str] = set()
    for m in MODULES:
        executed.update(Path(f"mutwork/executed_{m}.txt").read_text().split())
    lines = ["module\tmutant\told_status\told_group\tnew_status\tnew_executed"]
    per_module: dict[str, Counter[str]] = {m: Counter() for m in MODULES}
    pair: Counter[tuple[bool, bool]] = Counter()
    never: Counter[str] = Counter()
    gained: Counter[str] = Counter()
    for key in sample:
        row = rows[key]
        module, short, old, flag = row[0], row[1], row[2], row[3]
        new = new_status(codes, key)
        if new == "not_run":
            raise SystemExit(f"{key} is in the first {n} of the order but was not run")
        old_k, new_k = old == "killed", new in ("killed", "timeout")
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
        pair[(old_k, new_k)] += 1
        if old == "unexecuted":
            never["n"] += 1
            never["executed"] += is_exec
            never["killed"] += new_k
        if new_k and not old_k:
            gained[group] += 1
    out.write_text("\n".join(lines) + "\n")

    tot_old = sum(c["old"] for c in per_module.values())
    tot_new = sum(c["new"] for c in per_module.values())
    print(f"sample n={n}, first {n} of random.Random({SEED}).sample(all 2316, 2316)\n")
    print("| | killed | fraction | 95 % Wilson | x 2316 mutants |")
    print("|---|---|---|---|---|")
    for label, k in (("old suite (table.tsv)", tot_old), ("new suite (re-run)", tot_new)):
        lo, hi = wilson(k, n)
        print(
            f"| {label} | {k} of {n} | {pct(k / n)} | {pct(lo)} to {pct(hi)} | "
            f"{round(2316 * lo)} to {round(2316 * hi)} |"
        )
    b, c = pair[(False, True)], pair[(True, False)]
    d = (b - c) / n
    se = math.sqrt(b + c - (b - c) ** 2 / n) / n
    print(
        f"\npaired: both killed {pair[(True, True)]}, neither {pair[(False, False)]}, "
        f"new only {b}, old only {c}; difference {pct(d)} "
        f"(95 % CI {pct(d - 1.96 * se)} to {pct(d + 1.96 * se)}), "
        f"exact McNemar p = {mcnemar_exact(b, c):.2g}\n"
    )
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
    print(f"exact old score over all {len(rows)}: {pct(sum(exact_old.values()) / len(rows))}\n")
    print("| module | sampled | killed old | killed new | new timeouts | old % | new % |")
    print("|---|---|---|---|---|---|---|")
    for m in MODULES:
        cm = per_module[m]
        if cm["n"]:
            print(
                f"| {m} | {cm['n']} | {cm['old']} | {cm['new']} | {cm['timeout']} | "
                f"{pct(cm['old'] / cm['n'])} | {pct(cm['new'] / cm['n'])} |"
            )
    print(
        f"\nold never-executed in sample: {never['n']}, now executed {never['executed']}, "
        f"now killed {never['killed']}"
    )
    print("newly killed by old group: " + ", ".join(f"{g} {k}" for g, k in gained.most_common()))


def main() -> None:
    cmd, *args = sys.argv[1:]
    if cmd == "order":
        write_order(Path(args[0]))
    elif cmd == "report":
        out = Path(args[2]) if len(args) > 2 else HERE / "results" / "sample_rerun.tsv"
        report(Path(args[0]), int(args[1]), out)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
