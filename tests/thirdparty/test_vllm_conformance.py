"""Third-party conformance of vLLM 0.8's real block allocator (``conformance/``).

Every entry of ``conformance/vllm-0.8.xfails.json`` must still reproduce against the vllm-block
wheel (a violation the entry matches) and its program must pass against the bundled allocator;
its reproducer script must print the violation, and no other entry may cover it (the entries
are disjoint on each other's programs). The evictor-stale-entry deviation is pinned to its
mechanism (the failing eviction pops a stale heap entry), in the CPU-pool form too, and to the
benchmark's serving-trace crash; recursive-chain-walk to chain length (the fork fails at the
recursion limit, not before, in every fork path, and no other chain walk recurses);
touched-evicted-marked-computed to its mechanism (the failing mark flags an id evicted since its
promotion), in the recompute rule's shrunk form too. The
expected-failures mechanism of the plugin is checked here too: every stale entry is reported,
and a violation the entry does not cover fails the replay.
The wheel-dependent tests skip, with the fetch command, when the wheel is not cached. The
checks every release's file shares live in ``tests.thirdparty.xfails_conformance``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from models.core.invariants import Violation
from models.families.v0.capabilities import Config
from models.families.v0.invariants import Family
from models.families.v0.operations import Dev, Op, op_from_json
from properties.core.plugin import ExpectedFailure, matching
from properties.core.replay import run_program
from properties.core.targets import Target, load_target
from properties.families.v0.upstream import FETCH_COMMAND, load_vllm_v0
from tests.thirdparty import xfails_conformance as xc

ROOT = xc.ROOT
FILE = xc.XfailsFile("vllm-0.8", "properties.upstream:vllm_v0_allocator", load_vllm_v0,
                     FETCH_COMMAND)
XFAILS = FILE.path
SCRIPTS = FILE.scripts
VLLM = FILE.spec
BUNDLED = xc.BUNDLED
STALE_HEAP = "evictor-stale-entry"
RECURSIVE = "recursive-chain-walk"
TOUCHED = "touched-evicted-marked-computed"

ENTRIES = FILE.entries
RAW: dict[str, dict[str, Any]] = FILE.raw


@pytest.fixture(scope="module")
def vllm() -> Iterator[Target]:
    yield from FILE.target()


@pytest.fixture(scope="module")
def bundled() -> Target:
    return load_target(BUNDLED)


# --------------------------------------------------------------------------- the file itself


def test_entries_are_well_formed() -> None:
    xc.check_well_formed(FILE)


# --------------------------------------------------------------------------- against vLLM


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_entry_reproduces_against_vllm(vllm: Target, entry: ExpectedFailure) -> None:
    xc.check_reproduces(FILE, vllm, entry)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_no_other_entry_covers_the_program(vllm: Target, entry: ExpectedFailure) -> None:
    xc.check_only_entry(FILE, vllm, entry)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_entry_passes_against_bundled(bundled: Target, entry: ExpectedFailure) -> None:
    xc.run(bundled, entry, FILE.entries)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_reproducer_script_prints_the_violation(vllm: Target, entry: ExpectedFailure) -> None:
    xc.check_script(FILE, entry)


# --------------------------------------------------------------------------- evictor-stale-entry

# The CPU-pool form, as the engine meets it: the chain reaches the CPU by swap-out; swap-ins back
# and forth revive its CPU ids from the CPU evictor (CPU blocks are never marked accessed, so
# every CPU timestamp ties at the default).
STALE_HEAP_CPU: dict[str, Any] = {
    "config": {"block_size": 1, "num_gpu_blocks": 2, "num_cpu_blocks": 2},
    "program": [
        {"op": "allocate_immutable_chain", "prev": None, "chunks": [[1], [2]], "device": "gpu",
         "extra_hash": None},
        {"op": "swap", "blocks": [0, 1], "src": "gpu", "dst": "cpu"},
        {"op": "swap", "blocks": [0, 1], "src": "cpu", "dst": "gpu"},
        {"op": "swap", "blocks": [0, 1], "src": "gpu", "dst": "cpu"},
        {"op": "swap", "blocks": [0, 1], "src": "cpu", "dst": "gpu"},
        {"op": "allocate_immutable", "prev": None, "tokens": [3], "device": "cpu",
         "extra_hash": None},
        {"op": "free", "block": 2},
        {"op": "allocate_mutable", "prev": None, "device": "cpu"},
    ],
}


@pytest.fixture
def stale_pops(vllm: Target, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One flag per ``LRUEvictor.evict`` call while the test runs: whether the heap entry it
    accepts is stale (its content hash is not the one the free table holds for that id)."""
    evictor_cls = load_vllm_v0().evictor.LRUEvictor
    evict: Callable[[Any], tuple[int, int]] = evictor_cls.evict
    pops: list[bool] = []

    def recording_evict(self: Any) -> tuple[int, int]:
        current = (entry for entry in sorted(self.priority_queue)
                   if entry[2] in self.free_table
                   and self.free_table[entry[2]].last_accessed == entry[0])
        accepted = next(current, None)
        if accepted is not None:
            pops.append(accepted[3] != self.free_table[accepted[2]].content_hash)
        return evict(self)

    monkeypatch.setattr(evictor_cls, "evict", recording_evict)
    return pops


def _covering(violation: Violation, history: list[Op]) -> str | None:
    return next((e.id for e in ENTRIES if e.matches(violation, history)), None)


@pytest.mark.parametrize("form", ["entry", "cpu"])
def test_stale_heap_entry_is_what_fails(vllm: Target, bundled: Target, stale_pops: list[bool],
                                        form: str) -> None:
    """The failing eviction, and only it, accepts a stale heap entry; the entry covers the
    GPU form (its program) and the CPU form; the bundled allocator passes both."""
    raw = RAW[STALE_HEAP] if form == "entry" else STALE_HEAP_CPU
    program = [op_from_json(op) for op in raw["program"]]
    with pytest.raises(Violation) as info:
        run_program(vllm, Config(caps=vllm.caps, **raw["config"]), program)
    violation = info.value
    assert violation.step == len(program) - 1, str(violation)
    assert stale_pops and stale_pops[-1] and not any(stale_pops[:-1]), stale_pops
    assert _covering(violation, program) == STALE_HEAP, str(violation)
    run_program(bundled, Config(caps=bundled.caps, **raw["config"]), program)


def test_serving_trace_crash_is_the_stale_heap_entry(vllm: Target, stale_pops: list[bool]) -> None:
    """The benchmark's symptom: the small serving trace with CPU evictions dies in vLLM's
    ``_maybe_allocate_evicted_block_id`` on the CPU pool. It is this entry's deviation."""
    from benchmarks.run import SMALL_TRACE  # the benchmark owns the trace
    from benchmarks.serving_trace import generate

    trace = generate(replace(SMALL_TRACE, cpu_evictions=True, num_cpu_blocks=24))
    c = trace.config
    with pytest.raises(Violation) as info:
        run_program(vllm, Config(c.block_size, c.num_gpu_blocks, c.num_cpu_blocks, vllm.caps),
                    trace.program)
    violation = info.value
    failing = trace.program[violation.step or 0]
    assert failing.kind == "table_swap" and getattr(failing, "dst", None) is Dev.CPU, str(violation)
    assert stale_pops and stale_pops[-1] and not any(stale_pops[:-1]), str(violation)
    assert _covering(violation, list(trace.program[: (violation.step or 0) + 1])) == STALE_HEAP


def test_stale_heap_match_is_narrow() -> None:
    """The entry covers a messageless assertion at an evicting operation after three releases
    (free/swap, or table_free/table_swap), nothing else."""
    entry = next(e for e in ENTRIES if e.id == STALE_HEAP)
    free = op_from_json({"op": "free", "block": 0})
    swap = op_from_json({"op": "swap", "blocks": [0], "src": "gpu", "dst": "cpu"})
    table_free = op_from_json({"op": "table_free", "table": 0})
    table_swap = op_from_json({"op": "table_swap", "table": 0, "src": "gpu", "dst": "cpu"})
    alloc = op_from_json({"op": "allocate_mutable", "prev": None, "device": "gpu"})
    fork = op_from_json({"op": "fork", "block": 0})

    def crash(op: Op, message: str = "must succeed, raised assertion: AssertionError: "
              ) -> Violation:
        return Violation(Family.CRASH, f"{op.kind} {message}").at(op, 3)

    assert entry.matches(crash(alloc), [free, swap, free, alloc])
    assert entry.matches(crash(table_swap), [table_swap, table_free, table_swap, table_swap])
    assert not entry.matches(crash(alloc), [free, swap, alloc])  # two releases only
    assert not entry.matches(crash(fork), [free, free, free, fork])  # fork never evicts
    assert not entry.matches(crash(alloc, "must succeed, raised assertion: AssertionError: "
                                          "can't fork"), [free, free, free, alloc])
    assert not entry.matches(crash(alloc, "must succeed, raised unexpected: IndexError: "),
                             [free, free, free, alloc])
    leak = Violation(Family.LEAK, "id 1 lost").at(alloc, 3)
    assert not entry.matches(leak, [free, free, free, alloc])


# --------------------------------------------------------------------------- recursive-chain-walk


def _stack_depth() -> int:
    frame: FrameType | None = sys._getframe()
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


def _chain(blocks: int) -> dict[str, Any]:
    return {"op": "allocate_immutable_chain", "prev": None, "chunks": [[0]] * blocks,
            "device": "gpu", "extra_hash": None}


def _long_chain_forms(blocks: int) -> dict[str, tuple[dict[str, int], list[dict[str, Any]]]]:
    """Every way to walk a ``blocks``-long chain: fork it (block or table level, after a round
    trip through the CPU too), free it, swap it whole (table level too)."""
    cfg = {"block_size": 1, "num_gpu_blocks": blocks, "num_cpu_blocks": 0}
    cpu = {"block_size": 1, "num_gpu_blocks": blocks, "num_cpu_blocks": blocks}
    last = blocks - 1
    table = {"op": "table_allocate", "tokens": [0] * blocks, "device": "gpu", "extra_hash": None}
    out_in = [{"op": "swap", "blocks": list(range(blocks)), "src": s, "dst": d}
              for s, d in (("gpu", "cpu"), ("cpu", "gpu"))]
    return {
        "fork": (cfg, [_chain(blocks), {"op": "fork", "block": last}]),
        "table_fork": (cfg, [table, {"op": "table_fork", "table": 0}]),
        "fork_after_swaps": (cpu, [_chain(blocks), *out_in, {"op": "fork", "block": last}]),
        "free": (cfg, [_chain(blocks), {"op": "free", "block": last}]),
        "swap": (cpu, [_chain(blocks), *out_in]),
        "table_free": (cfg, [table, {"op": "table_free", "table": 0}]),
        "table_swap": (cpu, [table, {"op": "table_swap", "table": 0, "src": "gpu", "dst": "cpu"},
                             {"op": "table_swap", "table": 0, "src": "cpu", "dst": "gpu"}]),
    }


def _run_form(target: Target, cfg: dict[str, int], program: list[dict[str, Any]]) -> None:
    run_program(target, Config(caps=target.caps, **cfg), [op_from_json(op) for op in program])


@pytest.mark.parametrize("form", ["fork", "table_fork", "fork_after_swaps", "naive"])
def test_every_fork_of_a_long_chain_is_the_recursive_walk(vllm: Target, bundled: Target,
                                                          form: str) -> None:
    """Block-level and table-level forks, a chain that went to the CPU and back, the naive
    allocator: each dies of the recursion at the fork, each is this entry, and the bundled
    allocator passes each."""
    blocks = sys.getrecursionlimit()
    cfg, program = _long_chain_forms(blocks)["fork" if form == "naive" else form]
    target = load_target(VLLM, allocator_type="naive") if form == "naive" else vllm
    ops = [op_from_json(op) for op in program]
    with pytest.raises(Violation) as info:
        _run_form(target, cfg, program)
    violation = info.value
    assert violation.step == len(program) - 1, str(violation)
    assert violation.family is Family.TABLE and "RecursionError" in violation.message
    assert _covering(violation, ops) == RECURSIVE, str(violation)
    if form != "naive":
        _run_form(bundled, cfg, program)


@pytest.mark.parametrize("form", ["free", "swap", "table_free", "table_swap"])
def test_other_long_chain_walks_do_not_recurse(vllm: Target, form: str) -> None:
    """The deviation is fork's alone: freeing and swapping the same long chain pass against
    vLLM (per-block loops), so the entry names only fork and table_fork."""
    cfg, program = _long_chain_forms(sys.getrecursionlimit())[form]
    _run_form(vllm, cfg, program)


def test_fork_fails_at_the_recursion_limit_not_before(vllm: Target) -> None:
    """Chain length is the whole trigger: a chain that leaves the fork's recursion a margin
    below the limit (from this stack depth) forks correctly; a chain as long as the limit
    cannot fork from any depth."""
    margin = 40  # frames for fork, the runner and the adapter above the caller
    fits = sys.getrecursionlimit() - _stack_depth() - margin
    assert fits > 500, "the test runs too deep to show a passing long fork"
    cfg, program = _long_chain_forms(fits)["fork"]
    _run_form(vllm, cfg, program)
    cfg, program = _long_chain_forms(sys.getrecursionlimit())["fork"]
    with pytest.raises(Violation, match="RecursionError"):
        _run_form(vllm, cfg, program)


def test_recursive_walk_is_the_same_under_python_O(vllm: Target) -> None:
    """No assert is involved: with assertions stripped the script shows the same failure."""
    script = SCRIPTS / f"{RECURSIVE}.py"
    result = subprocess.run([sys.executable, "-O", str(script)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "step 1 raised RecursionError" in result.stdout, result.stdout
    assert "violation: [TABLE] fork must succeed, raised unexpected: RecursionError" in \
        result.stdout, result.stdout


def test_recursive_walk_match_is_narrow() -> None:
    """The entry covers a RecursionError at a fork (block or table level), nothing else; a
    fork through a cyclic chain left by swap-pool-crosstalk stays that entry's (listed first)."""
    entry = next(e for e in ENTRIES if e.id == RECURSIVE)
    chain = op_from_json(_chain(2))
    fork = op_from_json({"op": "fork", "block": 1})
    table_fork = op_from_json({"op": "table_fork", "table": 0})
    alloc = op_from_json({"op": "allocate_mutable", "prev": None, "device": "gpu"})
    swap = op_from_json({"op": "swap", "blocks": [0], "src": "cpu", "dst": "gpu"})
    free = op_from_json({"op": "free", "block": 0})
    recursion = "raised unexpected: RecursionError: maximum recursion depth exceeded"

    def table(op: Op, message: str) -> Violation:
        return Violation(Family.TABLE, f"{op.kind} must succeed, {message}").at(op, 1)

    assert entry.matches(table(fork, recursion), [chain, fork])
    assert entry.matches(table(table_fork, recursion), [chain, table_fork])
    assert not entry.matches(table(alloc, recursion), [chain, alloc])  # only forks
    assert not entry.matches(table(fork, "raised assertion: AssertionError: can't fork"),
                             [chain, fork])
    assert not entry.matches(table(fork, "raised unexpected: IndexError: "), [chain, fork])
    assert not entry.matches(Violation(Family.RC, "id 0: refcount").at(fork, 1), [chain, fork])
    crash = Violation(Family.CRASH, f"fork must succeed, {recursion}").at(fork, 1)
    assert not entry.matches(crash, [chain, fork])
    cyclic = table(fork, recursion).at(fork, 3)
    assert _covering(cyclic, [swap, alloc, free, fork]) == "swap-pool-crosstalk"


# ------------------------------------------------------------ touched-evicted-marked-computed

# The form the sequence-level machine's recompute rule found (shrunk): a request's prompt block is
# marked, its decoded block promoted but not marked when the table is freed; the same tokens come
# back and go; a new request's tail evicts the decoded block's id, and the mark flags it.
TOUCHED_RECOMPUTE: dict[str, Any] = {
    "config": {"block_size": 3, "num_gpu_blocks": 3, "num_cpu_blocks": 0},
    "program": [
        {"op": "tracker_start"},
        {"op": "table_allocate", "tokens": [0, 0, 1], "device": "gpu", "extra_hash": None},
        {"op": "mark_computed"},
        {"op": "table_append", "table": 0, "tokens": [0, 0, 0]},
        {"op": "table_free", "table": 0},
        {"op": "table_allocate", "tokens": [0, 0, 1, 0, 0, 0], "device": "gpu",
         "extra_hash": None},
        {"op": "table_free", "table": 1},
        {"op": "table_allocate", "tokens": [0, 0, 0, 0], "device": "gpu", "extra_hash": None},
        {"op": "seq_track", "table": 2},
        {"op": "mark_computed"},
        {"op": "table_append", "table": 2, "tokens": [0, 0, 0]},
        {"op": "seq_cached_tokens", "table": 2, "prefill": False},
    ],
}


@pytest.fixture
def stale_marks(vllm: Target, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One flag per ``mark_blocks_as_computed`` call of a GPU allocator while the test runs:
    whether it marks a touched id that no longer holds cached content (evicted and handed out
    again since its promotion)."""
    allocator_cls = load_vllm_v0().prefix_caching_block.PrefixCachingBlockAllocator
    mark: Callable[[Any, list[int]], None] = allocator_cls.mark_blocks_as_computed
    marks: list[bool] = []

    def recording_mark(self: Any, block_ids: list[int]) -> None:
        cached = set(self._cached_blocks.values())
        marks.append(any(i not in cached for i in self._touched_blocks))
        mark(self, block_ids)

    monkeypatch.setattr(allocator_cls, "mark_blocks_as_computed", recording_mark)
    return marks


@pytest.mark.parametrize("form", ["entry", "recompute"])
def test_touched_evicted_mark_is_what_fails(vllm: Target, bundled: Target,
                                            stale_marks: list[bool], form: str) -> None:
    """The last mark, and only it, flags an id evicted since its promotion; the entry covers
    its own program and the recompute rule's shrunk one; the bundled allocator passes both."""
    raw = RAW[TOUCHED] if form == "entry" else TOUCHED_RECOMPUTE
    program = [op_from_json(op) for op in raw["program"]]
    with pytest.raises(Violation) as info:
        run_program(vllm, Config(caps=vllm.caps, **raw["config"]), program)
    violation = info.value
    assert violation.step == len(program) - 1, str(violation)
    assert violation.family is Family.COMPUTED, str(violation)
    assert stale_marks and stale_marks[-1] and not any(stale_marks[:-1]), stale_marks
    assert _covering(violation, program) == TOUCHED, str(violation)
    run_program(bundled, Config(caps=bundled.caps, **raw["config"]), program)


def test_touched_evicted_match_is_narrow() -> None:
    """The entry covers a fresh (not frozen) get_num_cached_tokens mismatch after a release, an
    allocating table operation, a mark and an append, nothing else; cached_prefix stays
    cached-prefix-bisect's."""
    entry = next(e for e in ENTRIES if e.id == TOUCHED)
    alloc = op_from_json({"op": "table_allocate", "tokens": [3], "device": "gpu",
                          "extra_hash": None})
    free = op_from_json({"op": "table_free", "table": 0})
    mark = op_from_json({"op": "mark_computed"})
    append = op_from_json({"op": "table_append", "table": 1, "tokens": [4]})
    ask = op_from_json({"op": "seq_cached_tokens", "table": 1, "prefill": False})
    prefix = op_from_json({"op": "cached_prefix", "blocks": [0], "device": "gpu"})

    def computed(op: Op, message: str = "get_num_cached_tokens") -> Violation:
        return Violation(Family.COMPUTED, message).at(op, 4)

    assert entry.matches(computed(ask), [free, alloc, mark, append, ask])
    assert not entry.matches(computed(ask), [free, alloc, append, mark, ask])  # append, then mark
    assert not entry.matches(computed(ask), [alloc, free, mark, append, ask])  # nothing evicts
    assert not entry.matches(computed(ask, "get_num_cached_tokens (frozen during prefill)"),
                             [free, alloc, mark, append, ask])
    assert not entry.matches(computed(prefix, "find_cached_blocks_prefix: the computed cached "
                                              "prefix is 0 block(s)"),
                             [free, alloc, mark, append, prefix])
    assert not entry.matches(Violation(Family.RC, "get_num_cached_tokens").at(ask, 4),
                             [free, alloc, mark, append, ask])


# --------------------------------------------------------------------------- matching rules


def _entry(**match: Any) -> ExpectedFailure:
    return ExpectedFailure("e", Family.TABLE, "", {}, [], **match)


def test_matching_narrows_by_family_op_message_history_and_tokens() -> None:
    swap = op_from_json({"op": "swap", "blocks": [0], "src": "cpu", "dst": "gpu"})
    free = op_from_json({"op": "free", "block": 0})
    wild = op_from_json({"op": "allocate_immutable", "prev": None, "tokens": [2**61],
                         "device": "gpu", "extra_hash": None})
    alloc = op_from_json({"op": "allocate_mutable", "prev": None, "device": "gpu"})
    table = Violation(Family.TABLE, "block 1: id").at(alloc, 2)
    content = Violation(Family.CONTENT, "block 1: shares id").at(alloc, 2)
    assert _entry().matches(table) and not _entry().matches(content)
    assert _entry(families=(Family.CONTENT,)).matches(content)
    assert _entry(ops=("allocate_mutable",)).matches(table)
    assert not _entry(ops=("append",)).matches(table)
    assert _entry(message="^block").matches(table)
    assert not _entry(message="shares").matches(table)
    after = _entry(after=(("swap", "free"),))
    assert after.matches(table, [swap, free, alloc])
    assert not after.matches(table, [free, swap, alloc])
    assert not after.matches(table, [swap, alloc, free])  # the failing op itself is not "before"
    tokens = _entry(tokens=frozenset({2**61}))
    assert tokens.matches(table, [wild, alloc]) and not tokens.matches(table, [alloc])


def test_a_violation_a_step_did_not_absorb_is_not_absorbed_at_report_time() -> None:
    """A violation raised out of a machine step carries the program before it: matching it
    again when the test reports keeps the entry's ``after`` condition (it once did not, so
    any CRASH hid behind an entry for a crash after swaps)."""
    swap = op_from_json({"op": "swap", "blocks": [0], "src": "cpu", "dst": "gpu"})
    alloc = op_from_json({"op": "allocate_mutable", "prev": None, "device": "gpu"})
    entry = _entry(after=(("swap",),))
    unexpected = Violation(Family.TABLE, "block 1: id").at(alloc, 1)
    unexpected.prefixcache_history = [alloc, alloc]  # type: ignore[attr-defined]
    assert matching([entry], unexpected) is None
    expected = Violation(Family.TABLE, "block 1: id").at(alloc, 1)
    expected.prefixcache_history = [swap, alloc]  # type: ignore[attr-defined]
    assert matching([entry], expected) == [entry]
    group = BaseExceptionGroup("two", [expected, unexpected])
    assert matching([entry], group) is None


# --------------------------------------------------------------------------- plugin behaviour


def _replay_session(tmp_path: Path, entries: list[dict[str, Any]], spec: str) -> str:
    path = tmp_path / "xfails.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest",
         str(ROOT / "properties" / "families" / "v0" / "test_expected_failures.py"),
         "-p", "no:cacheprovider", "-q", "-rxXfE", f"--allocator={spec}",
         f"--xfails-file={path}", "--rootdir", str(ROOT)],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT)
    return f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"


def test_stale_entries_are_reported(tmp_path: Path) -> None:
    """Against the bundled allocator no vLLM entry fails: every one is reported as stale."""
    out = _replay_session(tmp_path, list(RAW.values()), BUNDLED)
    assert out.startswith("exit 1"), out
    assert f"{len(RAW)} failed" in out, out
    for entry_id in RAW:
        assert f"expected failure {entry_id!r} no longer fails: remove the entry" in out, entry_id


@pytest.mark.parametrize(("entry_id", "seen"), [("swap-pool-crosstalk", "[TABLE]"),
                                                (STALE_HEAP, "[CRASH]"), (RECURSIVE, "[TABLE]")])
def test_unexpected_family_still_fails(vllm: Target, tmp_path: Path, entry_id: str,
                                       seen: str) -> None:
    entry = dict(RAW[entry_id], family="HASH", match={})
    out = _replay_session(tmp_path, [entry], VLLM)
    assert out.startswith("exit 1"), out
    assert seen in out
