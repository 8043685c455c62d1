"""Misbehaving targets: the suite reports, and never crashes or hangs.

Each target of ``tests.hardening.misbehaving.targets`` is the bundled allocator with one fault:
a call raises, returns a value of the wrong type, hangs, or mutates a list it was given or
returned. Run through the runner (``run_program``), the Hypothesis state machines and
``prefixcache check``, each fault must end the run with exactly one violation whose message is
one line naming the call and what went wrong, within a bounded time.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, Op
from properties.core import selection
from properties.core.replay import run_program
from properties.core.targets import (
    DEFAULT_STEP_TIMEOUT,
    TIMEOUT_ENV_VAR,
    Target,
    TargetError,
    load_target,
    step_timeout_setting,
)
from properties.families.v0.machines.block_level import BlockLevelMachine
from properties.families.v0.runner import MISBEHAVED, Runner
from tests.hardening.misbehaving.targets import FAULTS, HANG_SECONDS

MODULE = "tests.hardening.misbehaving.targets"
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 0.3  # the step limit the hang tests set
A = ops.AllocateImmutable

#: Touches every call the faults live in (GPU 8 blocks, CPU 4, block size 2).
EVERYTHING: tuple[Op, ...] = (
    A(None, (1, 2)), A(0, (3, 4)), ops.AllocateMutable(None), ops.Fork(1), ops.Free(3),
    ops.Swap((0, 1), Dev.GPU, Dev.CPU), ops.MarkAccessed((2,), 1.0), ops.MarkComputed((2,)),
    ops.ComputedBlockIds((2,)), ops.CachedPrefix((0,)), ops.CountTouched((2,)), ops.HitRate(),
    ops.ResetPrefixCache(), ops.TableAllocate((1, 2, 3)), ops.TableMarkAccessed(0, 2.0),
    ops.AllocateImmutableChain(None, ((5, 6), (7, 8))), ops.AllocateMutable(None),
)
#: A copy-on-write on step 2, then an allocation.
COW: tuple[Op, ...] = (ops.AllocateMutable(None), ops.Fork(0), ops.Append(0, (1,)),
                       ops.AllocateMutable(None))

#: fault -> (program, step it fails at or None before any, message regex). Violations of the
#: runner start ``target misbehaving/NAME misbehaved (KIND)``; exceptions from an operation's
#: own call are the outcome, which the oracle reports as CRASH.
CASES: dict[str, tuple[Sequence[Op], int | None, str]] = {
    # exceptions
    "allocate_raises": (EVERYTHING, 1, r"^\[CRASH\] allocate_immutable must succeed, raised "
                        r"unexpected: RuntimeError: injected failure in allocate_immutable_block"),
    "allocate_raises_system_exit": (EVERYTHING, 1, r"raised unexpected: SystemExit: 3"),
    "free_count_raises": (EVERYTHING, 0, r"reading the allocator's state "
                          r"\(alloc\.get_num_free_blocks\) raised RuntimeError: injected"),
    "drain_raises": (EVERYTHING, 1, r"\(exception\): alloc\.clear_copy_on_writes\(\) \(the "
                     r"engine's drain after allocate_immutable\) raised RuntimeError"),
    "factory_raises": (EVERYTHING, None, r"\(exception\): the factory "
                       r"tests\.hardening\.misbehaving\.targets:factory_raises\('prefix_caching', "
                       r"8, 4, 2\) raised RuntimeError: injected failure creating 8 blocks"),
    # wrong types
    "free_count_str": (EVERYTHING, None, r"\(wrong type\): "
                       r"alloc\.get_num_free_blocks\(Device\.GPU\) returned str '8', expected int"),
    "free_count_none": (EVERYTHING, None, r"\(wrong type\): "
                        r"alloc\.get_num_free_blocks\(Device\.GPU\) returned NoneType None, "
                        r"expected int"),
    "swap_returns_list": (EVERYTHING, 5, r"\(wrong type\): alloc\.swap returned list "
                          r"\[\(0, 8\), \(1, 9\)\], expected dict of int -> int"),
    "block_id_float": (EVERYTHING, 0, r"\(wrong type\): block\.block_id returned float 0\.0, "
                       r"expected int or None \(reading block b0\)"),
    "allocate_returns_none": (EVERYTHING, 2, r"\(wrong type\): alloc\.allocate_mutable_block "
                              r"returned NoneType None, expected a block"),
    "chain_returns_tuple": (EVERYTHING, 15, r"\(wrong type\): alloc\.allocate_immutable_blocks "
                            r"returned tuple \(<block \d+>, <block \d+>\), expected list of "
                            r"blocks"),
    "fork_returns_generator": (EVERYTHING, 3, r"\(wrong type\): alloc\.fork returned generator"
                               r" .*, expected list of blocks"),
    "hit_rate_str": (EVERYTHING, 11, r"\(wrong type\): alloc\.get_prefix_cache_hit_rate "
                     r"returned str '0\.00', expected float"),
    "reset_returns_none": (EVERYTHING, 12, r"\(wrong type\): alloc\.reset_prefix_cache returned "
                           r"NoneType None, expected bool"),
    "computed_ids_tuple": (EVERYTHING, 8, r"\(wrong type\): alloc\.get_computed_block_ids "
                           r"returned tuple \(\), expected list of int"),
    "cached_prefix_generator": (EVERYTHING, 9, r"\(wrong type\): "
                                r"alloc\.find_cached_blocks_prefix returned generator .*, "
                                r"expected list of int"),
    "touched_float": (EVERYTHING, 10, r"\(wrong type\): alloc\.get_num_blocks_touched returned "
                      r"float 1\.0, expected int"),
    "cows_dict": (EVERYTHING, 0, r"\(wrong type\): alloc\.clear_copy_on_writes returned dict "
                  r"\{\}, expected list of \(int, int\)"),
    "physical_ids_generator": (EVERYTHING, 13, r"\(wrong type\): "
                               r"BlockTable\.physical_block_ids returned generator .*, expected "
                               r"list of int \(reading table t0\)"),
    "factory_returns_none": (EVERYTHING, None, r"\(wrong type\): the factory returned NoneType "
                             r"None, expected an allocator"),
    # hangs (the tests set a 0.3 s limit)
    "allocate_sleeps": (EVERYTHING, 2, r"\(hang\): step 2 allocate_mutable exceeded 0\.3 s "
                        r"\(in alloc\.allocate_mutable_block\)"),
    "allocate_spins": (EVERYTHING, 2, r"\(hang\): step 2 allocate_mutable exceeded 0\.3 s "
                       r"\(in alloc\.allocate_mutable_block\)"),
    "allocate_sleeps_briefly": (EVERYTHING, 2, r"\(hang\): step 2 allocate_mutable exceeded "
                                r"0\.3 s \(in alloc\.allocate_mutable_block\)"),
    "free_count_sleeps": (EVERYTHING, 0, r"\(hang\): step 0 allocate_immutable exceeded 0\.3 s "
                          r"\(in alloc\.get_num_free_blocks\)"),
    "factory_sleeps": (EVERYTHING, None, r"\(hang\): creating the allocator exceeded 0\.3 s "
                       r"\(in the factory tests\.hardening\.misbehaving\.targets:factory_sleeps"),
    # mutated arguments
    "allocate_mutates_tokens": (EVERYTHING, 0, r"\(mutated argument\): "
                                r"alloc\.allocate_immutable_block changed the list it was passed "
                                r"from list \[1, 2\] to list \[1, 2, 99\]"),
    "chain_mutates_chunks": (EVERYTHING, 15, r"\(mutated argument\): "
                             r"alloc\.allocate_immutable_blocks changed the list it was passed "
                             r"from list \[\[5, 6\], \[7, 8\]\] to list \[\[-5, 6\], \[7, 8\]\]"),
    "mark_accessed_clears_ids": (EVERYTHING, 6, r"\(mutated argument\): "
                                 r"alloc\.mark_blocks_as_accessed changed the list it was passed "
                                 r"from list \[2\] to list \[\]"),
    # mutated results
    "fork_mutates_result_later": (EVERYTHING, 4, r"\(mutated result\): the list alloc\.fork "
                                  r"returned at step 3 changed afterwards from list "
                                  r"\[<block \S+>, <block \S+>\] to list \[(<block \S+>, ){2}"),
    "swap_mutates_result_later": (EVERYTHING, 13, r"\(mutated result\): the dict alloc\.swap "
                                  r"returned at step 5 changed afterwards from dict "
                                  r"\{0: 8, 1: 9\} to dict \{0: 8, 1: 9, 10000: 10001\}"),
    "cows_cleared_later": (COW, 3, r"\(mutated result\): the list alloc\.clear_copy_on_writes "
                           r"\(drain\) returned at step 2 changed afterwards from list "
                           r"\[\(0, 1\)\] to list \[\]"),
}
HANGS = {name for name, fault in FAULTS.items() if fault.action in ("sleep", "spin", "brief")}


def test_every_fault_has_a_case() -> None:
    assert set(CASES) == set(FAULTS)
    assert len(FAULTS) >= 30


def target(name: str) -> Target:
    return load_target(f"{MODULE}:{name}").with_step_timeout(TIMEOUT)


def run(name: str) -> tuple[Violation, float]:
    """Run the fault's program; the violation it raises and the seconds it took."""
    program, _, _ = CASES[name]
    t = target(name)
    started = time.monotonic()
    with pytest.raises(Violation) as info:
        run_program(t, Config(2, 8, 4, t.caps), program)
    return info.value, time.monotonic() - started


#: Faults reported in the oracle's or the state reader's own words, not as ``target ...
#: misbehaved``: an operation's call raising is its outcome, judged by the oracle.
PLAIN_CRASH = {"allocate_raises", "allocate_raises_system_exit", "free_count_raises"}
#: Exceptions are CRASH whoever reports them; the other misbehaviours are ``MISBEHAVED``
#: (the TARGET family).
EXCEPTIONS = {name for name, fault in FAULTS.items()
              if fault.action in ("raise", "system_exit")}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fault_is_one_clear_line(name: str) -> None:
    violation, seconds = run(name)
    _, step, pattern = CASES[name]
    text = str(violation)
    assert "\n" not in text, text
    assert re.search(pattern, text), text
    assert violation.family is (Family.CRASH if name in EXCEPTIONS else MISBEHAVED)
    assert violation.step == step
    if name not in PLAIN_CRASH:
        prefix = f"[{violation.family.value}] target misbehaving/{name} misbehaved ("
        assert text.startswith(prefix), text
    # Hangs are cut at the limit (a brief sleep on the main thread too), nothing else waits.
    assert seconds < (TIMEOUT + 2.0 if name in HANGS else 2.0), seconds


def test_faults_fire_only_where_they_should() -> None:
    """The same programs pass against the bundled allocator: no false alarm from the checks
    (in-out ``get_computed_block_ids``, the table's own ``physical_block_ids`` list...)."""
    bundled = load_target().with_step_timeout(TIMEOUT)
    for program in (EVERYTHING, COW):
        run_program(bundled, Config(2, 8, 4, bundled.caps), program)


def test_a_hang_is_remembered_so_replays_fail_at_once() -> None:
    """Hypothesis replays a failing program (shrinking, final replay): the second run of the
    same program fails identically without waiting again."""
    first, _ = run("allocate_sleeps")
    again, seconds = run("allocate_sleeps")
    assert seconds < TIMEOUT
    assert str(again) == str(first)


def test_the_reproducer_log_shows_the_call_that_hung() -> None:
    t = target("allocate_sleeps")
    runner = Runner(t, Config(2, 8, 4, t.caps))
    for op in EVERYTHING[:2]:
        runner.execute(op)
    with pytest.raises(Violation):
        runner.execute(EVERYTHING[2])
    last = runner.log[-1]
    assert last.op == EVERYTHING[2] and last.outcome.detail == "timed out"
    assert len(last.stmts) == 1


# --------------------------------------------------------------------------- worker threads


def run_in_thread(name: str) -> tuple[BaseException | None, float]:
    box: list[BaseException | None] = [None]

    def body() -> None:
        try:
            run(name)
        except BaseException as exc:  # reported to the main thread
            box[0] = exc

    worker = threading.Thread(target=body)
    started = time.monotonic()
    worker.start()
    worker.join(HANG_SECONDS / 2)
    assert not worker.is_alive(), "the watchdog did not stop the hang in a worker thread"
    return box[0], time.monotonic() - started


@pytest.mark.parametrize("name", ["allocate_spins", "allocate_sleeps_briefly"])
def test_hang_in_a_worker_thread(name: str) -> None:
    """No SIGALRM off the main thread: the monitor thread interrupts a Python loop at the limit
    and reports a blocking sleep as soon as it returns."""
    from tests.hardening.misbehaving.targets import BRIEF_SECONDS

    error, seconds = run_in_thread(name)
    assert error is None, error  # ``run`` asserted the violation and its line
    bound = TIMEOUT + 2.0 if name == "allocate_spins" else BRIEF_SECONDS + 2.0
    assert seconds < bound


# --------------------------------------------------------------------------- Hypothesis

BUDGET = settings(max_examples=30, stateful_step_count=12, derandomize=True, database=None,
                  deadline=None, report_multiple_bugs=False,
                  phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
                  suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("name, pattern", [
    ("free_count_str", r"get_num_free_blocks\(Device\.GPU\) returned str"),
    ("allocate_returns_none", r"alloc\.allocate_mutable_block returned NoneType None"),
    ("allocate_sleeps", r"\(hang\): step \d+ allocate_mutable exceeded 0\.3 s"),
])
def test_state_machine_reports_a_plain_failure(name: str, pattern: str,
                                               restore_target: None) -> None:
    """Under Hypothesis (with shrinking) a misbehaviour, a hang included, is an ordinary
    failing example: the Violation itself, with its reproducer, not a flaky or internal
    error."""
    selection.use(target(name))
    started = time.monotonic()
    with pytest.raises(Violation) as info:
        run_state_machine_as_test(BlockLevelMachine, settings=BUDGET)
    violation = info.value
    assert violation.family is MISBEHAVED
    assert re.search(pattern, str(violation)), str(violation)
    notes = "\n".join(getattr(violation, "__notes__", []))
    assert "Replay it as a plain Python script" in notes
    assert time.monotonic() - started < 30


# --------------------------------------------------------------------------- options


def test_step_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMEOUT_ENV_VAR, raising=False)
    assert step_timeout_setting() == DEFAULT_STEP_TIMEOUT
    assert step_timeout_setting("2.5") == 2.5
    assert step_timeout_setting(0) is None
    monkeypatch.setenv(TIMEOUT_ENV_VAR, "4")
    assert step_timeout_setting() == 4.0
    assert load_target().step_timeout == 4.0
    assert load_target(step_timeout=1).step_timeout == 1.0
    assert load_target(step_timeout="0").step_timeout is None
    with pytest.raises(TargetError, match="not a number"):
        step_timeout_setting("soon")


def test_no_limit_means_no_watchdog() -> None:
    """With the limit off, a slow step is just slow (and reported by nothing)."""
    t = load_target(f"{MODULE}:allocate_sleeps_briefly").with_step_timeout(None)
    run_program(t, Config(2, 8, 4, t.caps), [ops.AllocateMutable(None)])


def check(name: str, tmp_path: Path, *extra: str) -> tuple[int, dict[str, object], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(TIMEOUT_ENV_VAR, None)
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "properties.core.cli", "check", "--allocator", f"{MODULE}:{name}",
         "--report-dir", str(out), "--profile", "mutation", "--max-examples", "15",
         "--max-steps", "10", *extra],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    data = json.loads((out / "conformance.json").read_text(encoding="utf-8"))
    markdown = (out / "conformance.md").read_text(encoding="utf-8")
    return proc.returncode, data, markdown


@pytest.mark.parametrize("name, extra, pattern", [
    ("free_count_str", (), r"alloc\.get_num_free_blocks\(Device\.GPU\) returned str '\d+', "
                           r"expected int"),
    ("allocate_sleeps", ("--step-timeout", "0.3"),
     r"\(hang\): step \d+ \w+ exceeded 0\.3 s \(in \S+\)"),
])
def test_prefixcache_check_reports_one_line(name: str, extra: tuple[str, ...], pattern: str,
                                            tmp_path: Path) -> None:
    code, data, markdown = check(name, tmp_path, *extra)
    assert code == 1
    assert data["errors"] == []
    findings = data["findings"]
    assert isinstance(findings, list) and findings
    for finding in findings:
        message = finding["message"]
        assert finding["family"] == MISBEHAVED.value and not finding["expected"]
        assert "\n" not in message and re.search(pattern, message), message
        assert f"```\n{message}\n```" in markdown
    assert data["families"][MISBEHAVED.value] == "FAIL"  # type: ignore[index]
    if extra:
        assert "prefixcache step timeout: 0.3 s" in data["header"]  # type: ignore[operator]
