"""Trace record and replay: the recorder is transparent to engine code, a recorded trace
round-trips through JSON Lines and replays cleanly against the model and the allocator it was
recorded on, a broken allocator is caught replaying it, and the shipped traces replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.cli import main
from fuzz.families.v0.tools import FUZZ_DIR
from fuzz.families.v0.trace import RecordingAllocator, TraceError, read_trace, replay, write_trace
from fuzz.families.v0.workloads import WORKLOADS, Workload, record
from models.families.v0.operations import op_to_json, outcome_to_json
from prefixcache import PrefixCacheError
from prefixcache.block_table import BlockTable
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.utils import Device
from properties.core.selection import current_target
from properties.core.targets import Target

SMALL = Workload("small", 5, 2, 10, 6, 18, arrival=0.7, fork_rate=0.5)
TRACES = sorted((FUZZ_DIR / "traces").glob("*.jsonl"))


def test_recorder_is_transparent_to_block_tables() -> None:
    """The same table operations give the same ids and copy-on-writes with and without it."""
    def drive(alloc: object) -> list[object]:
        seen: list[object] = []
        table = BlockTable(block_size=2, block_allocator=alloc)  # type: ignore[arg-type]
        table.allocate([1, 2, 3], device=Device.GPU)
        child = table.fork()
        child.append_token_ids([9])
        table.append_token_ids([4, 5])
        seen += [table.physical_block_ids[:], child.physical_block_ids[:]]
        seen.append(alloc.clear_copy_on_writes())  # type: ignore[attr-defined]
        child.free()
        table.free()
        seen.append(alloc.get_num_free_blocks(Device.GPU))  # type: ignore[attr-defined]
        return seen

    bare = CpuGpuBlockAllocator.create("prefix_caching", 6, 2, 2)
    inner = CpuGpuBlockAllocator.create("prefix_caching", 6, 2, 2)
    recorder = RecordingAllocator(inner, 2, misuse_types=(PrefixCacheError,))
    assert drive(recorder) == drive(bare)
    kinds = [e.op.kind for e in recorder.entries]
    assert kinds[:4] == ["allocate_immutable_chain", "allocate_mutable", "append", "fork"]
    assert sum(len(e.outcome.cows) for e in recorder.entries) == 1


def test_round_trip_and_replay(tmp_path: Path, bundled: Target) -> None:
    recorder = record(SMALL)
    path = tmp_path / "small.jsonl"
    write_trace(path, recorder)
    trace = read_trace(path)
    assert trace.config == recorder.config
    assert [(op_to_json(e.op), outcome_to_json(e.outcome)) for e in trace.entries] == \
        [(op_to_json(e.op), outcome_to_json(e.outcome)) for e in recorder.entries]
    result = replay(trace, bundled)
    assert result.ok, (result.violation, result.divergence, result.out_of_contract)
    assert result.steps == len(trace.entries) > 100
    assert [o.new_blocks for o in result.outcomes] == [e.outcome.new_blocks
                                                       for e in trace.entries]


def test_replay_catches_a_broken_allocator(mutant: Target) -> None:
    trace_path = FUZZ_DIR / "traces" / "parallel_sampling_cow.jsonl"
    result = replay(read_trace(trace_path), mutant)
    assert not result.ok
    assert result.violation is not None or result.divergence is not None


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_shipped_trace_replays(path: Path) -> None:
    """Regression corpus: each shipped trace replays against the selected target."""
    result = replay(read_trace(path), current_target())
    assert result.ok, (result.violation, result.divergence, result.out_of_contract)


def test_replay_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", *map(str, TRACES)]) == 0
    assert capsys.readouterr().out.count(": ok: ") == len(TRACES)


def test_shipped_traces_are_the_workloads() -> None:
    assert sorted(p.stem for p in TRACES) == sorted(w.name for w in WORKLOADS)


def test_keyed_tables_record_and_replay(tmp_path: Path, bundled: Target) -> None:
    """A keyed request's partial tail is a mutable block allocated with its extra key: the
    trace records the key and replays to the same ids (two requests share only under one
    key)."""
    inner = CpuGpuBlockAllocator.create("prefix_caching", 8, 2, 2)
    recorder = RecordingAllocator(inner, 2, misuse_types=(PrefixCacheError,))
    keyed = BlockTable(block_size=2, block_allocator=recorder)  # type: ignore[arg-type]
    keyed.allocate([1, 2, 3], device=Device.GPU, extra_hash=5)
    keyed.append_token_ids([4], extra_hash=5)
    twin = BlockTable(block_size=2, block_allocator=recorder)  # type: ignore[arg-type]
    twin.allocate([1, 2, 3, 4], device=Device.GPU, extra_hash=5)
    other = BlockTable(block_size=2, block_allocator=recorder)  # type: ignore[arg-type]
    other.allocate([1, 2, 3, 4], device=Device.GPU)
    assert twin.physical_block_ids == keyed.physical_block_ids
    assert not set(other.physical_block_ids) & set(keyed.physical_block_ids)
    mutable = [e.op for e in recorder.entries if e.op.kind == "allocate_mutable"]
    assert [op.extra_hash for op in mutable] == [5]  # type: ignore[attr-defined]
    path = tmp_path / "keyed.jsonl"
    write_trace(path, recorder)
    result = replay(read_trace(path), bundled)
    assert result.ok, (result.violation, result.divergence, result.out_of_contract)


def test_unrepresentable_calls_are_refused() -> None:
    inner = CpuGpuBlockAllocator.create("prefix_caching", 4, 0, 2)
    recorder = RecordingAllocator(inner, 2)
    with pytest.raises(TraceError):
        recorder.mark_blocks_as_accessed([3], 1.0)


def test_replay_command_reports_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = FUZZ_DIR / "traces" / "parallel_sampling_cow.jsonl"
    assert main(["replay", str(path), "--allocator", "tests.zoo.v0.broken:cow_not_recorded"]) == 1
    assert "FAILED" in capsys.readouterr().out
