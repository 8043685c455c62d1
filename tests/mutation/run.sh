#!/usr/bin/env bash
# Mutation testing of the allocator modules with `pytest properties` as the test command.
#
#   tests/mutation/run.sh [WORKDIR]         (default WORKDIR: /tmp/prefixcache-mutation)
#
# Copies the repository (without .git) to WORKDIR, appends mutmut.toml to the copy's
# pyproject.toml, records which allocator statements `pytest properties` executes
# (coverage, same profile and budget as the mutation runs), runs mutmut with one worker on
# the mutants whose changed statement is executed, module by module in priority order,
# re-runs the category (c) survivors against tests/hardening, and writes
# results/{table.tsv,summary.md,hardening.tsv} and survivors_body.md in WORKDIR/mutwork.
# Needs a venv with the repo's [test] extra and mutmut 3 (MUTVENV, default /work/mutvenv).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WORK="${1:-/tmp/prefixcache-mutation}"
VENV="${MUTVENV:-/work/mutvenv}"
MODULES="${MODULES:-prefix_caching_block evictor block_table cpu_gpu_block_allocator naive_block common hashing _validation}"
PROFILE=(-x -p no:xdist -p no:cacheprovider --hypothesis-profile=mutation --max-examples=40)

mkdir -p "$WORK"
(cd "$REPO" && tar --exclude=./.git --exclude=./.venv --exclude=./reports --exclude=./mutants -cf - .) \
  | tar -xf - -C "$WORK"
cd "$WORK"
grep -q '^\[tool.mutmut\]' pyproject.toml || cat "$HERE/mutmut.toml" >> pyproject.toml
mkdir -p mutwork/logs
cp "$HERE"/{plan.py,table.py,labels.py,modules.py,report.py,rerun.py} mutwork/

# 1. Generate the mutants and mutmut's test mapping (a filter that matches nothing).
"$VENV/bin/mutmut" run --max-children 1 "no-such-mutant*" > mutwork/logs/generate.log 2>&1 || true
# 2. Statements the suite executes.
"$VENV/bin/coverage" run --data-file=mutwork/.coverage --source=prefixcache \
  -m pytest properties "${PROFILE[@]}" -q > mutwork/logs/coverage.log 2>&1
"$VENV/bin/python" mutwork/plan.py mutwork/.coverage $MODULES
# 3. mutmut on the executed mutants, one worker.
for m in $MODULES; do
  mapfile -t names < "mutwork/executed_${m}.txt"
  [ "${#names[@]}" -gt 0 ] || continue
  echo "=== $m $(date -u +%H:%M:%S)"
  "$VENV/bin/mutmut" run --max-children 1 "${names[@]}" > "mutwork/logs/${m}.log" 2>&1 || true
done
# 4. Table, (c) re-runs against tests/hardening, report.
"$VENV/bin/python" mutwork/table.py
"$VENV/bin/python" mutwork/report.py --candidates
DES=(--deselect tests/hardening/test_misuse.py::test_property_holds_with_asserts_stripped)
for f in mutwork/cand_*.txt; do
  "$VENV/bin/python" mutwork/rerun.py "$f" mutwork/hardening.tsv --hypothesis-profile=mutation \
    "${DES[@]}" tests/hardening/test_misuse.py tests/hardening/test_isolation.py
done
"$VENV/bin/python" mutwork/report.py
