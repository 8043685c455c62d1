"""Scores per module and the survivors list, from mutwork/table.tsv, labels.py and
mutwork/hardening.tsv (the category (c) re-runs).

Score (a): mutants killed (or timed out) by `pytest properties` / all mutants of the module
(given only for modules whose executed mutants were all run).
Score (a+c): adds the category (c) survivors that `tests/hardening` kills.
``--candidates`` writes mutwork/cand_<group>.txt (the (c) survivors to re-run) and stops.
"""

from __future__ import annotations

import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from labels import GROUPS, RULES
from modules import MODULES

RERUN_GROUPS = ("C-VAL", "C-HASH")


def group_of(module: str, short: str, flag: str, status: str) -> str:
    if flag == "message":
        return "C-MSG"
    base, num = re.match(r"(.*)__mutmut_(\d+)$", short).groups()  # type: ignore[union-attr]
    for rule in RULES:
        mod, pattern, nums, group = rule[:4]
        if len(rule) > 4 and rule[4] == "unexec" and status != "unexecuted":
            continue
        if mod == module and re.search(pattern, base) and (nums is None or int(num) in nums):
            return group
    return "UNCLASSIFIED"


def pretty(short: str) -> str:
    base, num = re.match(r"(.*)__mutmut_(\d+)$", short).groups()  # type: ignore[union-attr]
    return base.removeprefix("x_").replace("xǁ", "").replace("ǁ", ".") + f" #{num}"


def load_codes(*paths: str) -> dict[str, int]:
    """Exit code per mutant from rerun.py output files (later files win)."""
    codes: dict[str, int] = {}
    for path in map(Path, paths):
        if path.exists():
            for line in path.read_text().splitlines():
                name, code, _seconds = line.split("\t")
                codes[name.split(".", 2)[2]] = int(code)
    return codes


def main() -> None:
    rows = [line.split("\t") for line in Path("mutwork/table.tsv").read_text().splitlines()]
    hardening = load_codes("mutwork/hardening.tsv", "mutwork/hardening_held.tsv")
    full_budget = load_codes("mutwork/budget150.tsv")
    per: dict[str, Counter[str]] = defaultdict(Counter)
    groups: dict[str, list[tuple[str, str, str, str]]] = defaultdict(list)
    for module, short, status, flag, diff in rows:
        c = per[module]
        c["total"] += 1
        if status in ("killed", "timeout", "not_run"):
            c[status] += 1
            continue
        c["survived"] += 1
        c["unexecuted"] += status == "unexecuted"
        group = group_of(module, short, flag, status)
        category = GROUPS[group][0]
        c["cat_" + category] += 1
        code = hardening.get(short)
        if category == "c" and code is not None:
            c["c_rerun"] += 1
            c["c_killed"] += code != 0
        if short in full_budget:
            c["d_rerun150"] += 1
            c["d_killed150"] += full_budget[short] != 0
        groups[group].append((module, short, status, diff))
    if "--candidates" in sys.argv:
        for group in RERUN_GROUPS:
            names = [f"prefixcache.{m}.{s}" for m, s, _st, _d in groups.get(group, [])]
            Path(f"mutwork/cand_{group}.txt").write_text("".join(n + "\n" for n in names))
        return
    complete: Counter[str] = Counter()
    everything: Counter[str] = Counter()
    table = [
        "| module | mutants | killed (a) | timeout | survived | never executed "
        "| (b) | (c) | (c) killed by hardening | (d) | (d) killed at 150 examples | not run "
        "| score (a) | score (a+c) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for module in [*MODULES, "TOTAL, fully run modules", "TOTAL, all modules"]:
        if module == "TOTAL, fully run modules":
            c = complete
        elif module == "TOTAL, all modules":
            c = everything
        else:
            c = per[module]
            everything.update(c)
            if c["not_run"] == 0:
                complete.update(c)
        killed = c["killed"] + c["timeout"]
        if c["total"] and c["not_run"] == 0:
            score_a = f"{100 * killed / c['total']:.1f} %"
            score_ac = f"{100 * (killed + c['c_killed']) / c['total']:.1f} %"
        else:
            score_a = score_ac = "incomplete"
        table.append(
            f"| {module} | {c['total']} | {c['killed']} | {c['timeout']} | "
            f"{c['survived']} | {c['unexecuted']} | {c['cat_b']} | {c['cat_c']} | "
            f"{c['c_killed']} of {c['c_rerun']} | {c['cat_d']} | "
            f"{c['d_killed150']} of {c['d_rerun150']} | {c['not_run']} | "
            f"{score_a} | {score_ac} |"
        )
    Path("mutwork/summary.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    out: list[str] = []
    for group, (category, text) in GROUPS.items():
        items = groups.get(group)
        if not items:
            continue
        out += [f"### {group} (category {category}): {len(items)} mutants", "", text, ""]
        for module, short, status, diff in items:
            code = hardening.get(short)
            rerun = (
                ""
                if code is None
                else (
                    "; **killed by tests/hardening**" if code != 0 else "; survives tests/hardening"
                )
            )
            never = "; never executed" if status == "unexecuted" else ""
            if short in full_budget:
                never += (
                    "; **killed at 150 examples**"
                    if full_budget[short] != 0
                    else "; survives 150 examples"
                )
            shown = diff.replace("`", "'")
            shown = shown if len(shown) <= 150 else shown[:147] + "..."
            out.append(f"- `{module}` {pretty(short)}{never}{rerun}: `{shown}`")
        out.append("")
    Path("mutwork/survivors_body.md").write_text("\n".join(out) + "\n")
    print("groups:", {g: len(v) for g, v in groups.items()})


if __name__ == "__main__":
    main()
