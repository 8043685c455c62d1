"""Programs compiled to straight-line Python against one target, for timing.

The runner interprets call plans and snapshots the allocator after every step, which costs far
more than the allocator itself. Here each operation is rendered once, with the target's own
adapter call plans (exactly the lines a reproducer prints), into module source that is compiled
once; a run executes that code object in a fresh namespace (``alloc``, ``Device``,
``BlockTable`` of a new allocator), so the only work timed is the target's.

Two variants share the rendered lines: ``plain`` (nothing but the calls: total time; a hook
between chunks reads free counts for validation, untimed) and ``timed`` (a clock reading
between operations: per-operation time, minus the calibrated cost of one reading). The clock is
this thread's CPU time. :func:`free_counts_at` re-runs a program with a marker before every
operation, to name the one that failed.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from types import CodeType
from typing import Any

from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.operations import Op
from properties.core.calls import Name, Stmt, render
from properties.core.targets import Target
from properties.families.v0.adapter import FamilyAdapter
from properties.families.v0.runner import Step

__all__ = [
    "CHUNK",
    "CLOCK",
    "TICK",
    "CompiledProgram",
    "ProgramError",
    "RenderedOp",
    "chunk_ends",
    "clean_heap",
    "clock_overhead_ns",
    "compile_log",
    "compile_table_program",
    "free_counts",
    "free_counts_at",
    "merge_min",
    "no_gc",
    "render_log",
    "render_table_program",
    "run_ticked",
]

_CLOCK = "_clock_"  # the clock, see CLOCK
_RECORD = "_record_"  # list.append of the clock readings
#: The source line that records one clock reading in a timed variant.
TICK = f"{_RECORD}({_CLOCK}())"
_PROBE = "_probe_"  # list.append of free-count pairs
_AT = "_at_"  # index of the operation running (probe runs only)


#: Thread CPU time: other processes sharing the cores do not inflate it, as they do wall time
#: (one clock reading costs more, about 0.3-2 us, and is calibrated out).
CLOCK: Callable[[], int] = time.thread_time_ns


class ProgramError(RuntimeError):
    """A program did not run as rendered (an operation failed where it must succeed)."""


@contextmanager
def no_gc() -> Iterator[None]:
    """Keep the cyclic collector off (it would bill its pauses to whichever operation
    happened to trigger them). No collection first: with a large heap (recorded examples)
    each one costs tens of milliseconds, more than the runs it would precede; a whole
    program's run collects first instead (:func:`clean_heap`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def clean_heap() -> None:
    """Collect the garbage earlier runs left (untimed), before a program's timed run. A run's
    allocator dies as cyclic garbage (blocks and allocator refer to each other) while the
    collector is off; left there, a large-trace run's 11 MB of it made each later run of the
    same program slower than the one before (0.47 s, then 0.83-0.87 s), billing whichever
    target ran after another the cache and page misses of a growing heap."""
    gc.collect()


@dataclass(frozen=True, slots=True)
class RenderedOp:
    kind: str
    lines: tuple[str, ...]
    may_fail: bool = False  # the recorded run raised here: guard it


def _guarded(op: RenderedOp) -> list[str]:
    if not op.may_fail:
        return list(op.lines)
    return ["try:", *(f"    {line}" for line in op.lines), "except Exception:", "    pass"]


def _failure(exc: BaseException) -> str:
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


CHUNK = 1_000  # operations per code object: compile time grows faster than linearly


@dataclass(frozen=True)
class CompiledProgram:
    """One program rendered for one target; ``kinds[i]`` is the kind of operation ``i``.

    The code is split into chunks of about :data:`CHUNK` operations (ending at allowed break
    points when given: a trace's step boundaries), executed in order in one namespace;
    ``ends[i]`` is the index just past chunk ``i``'s last operation. A timed chunk starts with
    a clock reading, so ``i`` operations take ``i+1`` readings and the call into the next
    chunk is never billed to an operation.
    """

    target: Target
    config: Config
    kinds: tuple[str, ...]
    plain: tuple[CodeType, ...]
    timed: tuple[CodeType, ...]
    ends: tuple[int, ...]
    lines: int
    rendered: tuple[RenderedOp, ...]

    def fresh_env(self) -> dict[str, Any]:
        """Names the rendered calls use, bound to a new allocator (untimed)."""
        env: dict[str, Any] = self.target.adapter(self.config).env()
        return env

    def run_plain(self, clock: Callable[[], int] = CLOCK,
                  after_chunk: Callable[[int, dict[str, Any]], None] | None = None,
                  env: dict[str, Any] | None = None) -> float:
        """Seconds to execute every operation once on a fresh allocator (or in ``env``, the
        names the calls use bound to something else: ``benchmarks.floor``).

        ``after_chunk(end, env)`` runs untimed after each chunk (``end`` as in ``ends``). An
        operation that raises becomes a :class:`ProgramError` naming its chunk."""
        env = self.fresh_env() if env is None else env
        elapsed = 0
        begin = 0
        clean_heap()
        with no_gc():
            for code, end in zip(self.plain, self.ends, strict=True):
                start = clock()
                try:
                    exec(code, env)
                except Exception as exc:
                    raise ProgramError(f"an operation in {begin}..{end - 1} raised "
                                       f"{_failure(exc)}") from exc
                elapsed += clock() - start
                if after_chunk is not None:
                    after_chunk(end, env)
                begin = end
        return elapsed / 1e9

    def run_timed(self, overhead_ns: float, clock: Callable[[], int] = CLOCK,
                  ) -> dict[str, float]:
        """Seconds per operation kind on a fresh allocator (``overhead_ns``, the cost of one
        clock reading, subtracted per operation)."""
        if not self.timed and self.kinds:
            raise ProgramError("compiled without the timed variant")
        env = self.fresh_env()
        clean_heap()
        per_kind, ran = run_ticked(self.timed, env, self.kinds, overhead_ns, clock)
        if ran != len(self.kinds):
            raise ProgramError(f"{ran} of {len(self.kinds)} operations ran")
        return per_kind

    def counts(self) -> Counter[str]:
        return Counter(self.kinds)


def chunk_ends(count: int, breaks: Iterable[int] | None = None,
               chunk: int = CHUNK) -> tuple[int, ...]:
    """Chunk ends for ``count`` operations: every ``chunk``, or, given ``breaks`` (ascending
    op indices where a chunk may end), the last break before a chunk would grow past
    ``chunk`` operations."""
    if breaks is None:
        return tuple(range(chunk, count, chunk)) + ((count,) if count else ())
    ends: list[int] = []
    last = previous = 0
    for point in breaks:
        if not 0 < point < count:
            continue
        if point - last > chunk and previous > last:
            ends.append(previous)
            last = previous
        previous = point
    if count:
        ends.append(count)
    return tuple(ends)


def run_ticked(codes: Sequence[CodeType], env: dict[str, Any], kinds: Sequence[str],
               overhead_ns: float, clock: Callable[[], int] = CLOCK,
               ) -> tuple[dict[str, float], int]:
    """Execute timed variants (a :data:`TICK` before the first operation and after each) in
    ``env``, the collector off: seconds per kind (the i-th interval is ``kinds[i]``'s, less
    ``overhead_ns``, floored at 0) and how many intervals were recorded."""
    env[_CLOCK] = clock
    per_kind: dict[str, float] = {}
    index = 0
    with no_gc():
        for code in codes:
            stamps: list[int] = []
            env[_RECORD] = stamps.append
            exec(code, env)
            for before, after in pairwise(stamps):
                kind = kinds[index]
                per_kind[kind] = per_kind.get(kind, 0.0) + (after - before - overhead_ns)
                index += 1
    return {k: max(v, 0.0) / 1e9 for k, v in per_kind.items()}, index


def _compile(rendered: Sequence[RenderedOp], ends: Sequence[int], *, timed: bool,
             name: str) -> tuple[tuple[CodeType, ...], int]:
    tick = TICK
    codes: list[CodeType] = []
    lines = 0
    start = 0
    for end in ends:
        out: list[str] = [tick] if timed else []
        for op in rendered[start:end]:
            out += _guarded(op)
            if timed:
                out.append(tick)
        lines += len(out)
        codes.append(compile("\n".join(out) + "\n", f"{name}[{start}]", "exec"))
        start = end
    return tuple(codes), lines


def build(target: Target, config: Config, rendered: Sequence[RenderedOp], name: str,
          *, timed_variant: bool = True, breaks: Iterable[int] | None = None,
          chunk: int = CHUNK) -> CompiledProgram:
    ends = chunk_ends(len(rendered), breaks, chunk)
    plain, lines = _compile(rendered, ends, timed=False, name=f"<{name}:plain>")
    timed: tuple[CodeType, ...] = ()
    if timed_variant:
        timed, _ = _compile(rendered, ends, timed=True, name=f"<{name}:timed>")
    return CompiledProgram(target, config, tuple(op.kind for op in rendered), plain, timed,
                           ends, lines, tuple(rendered))


# --------------------------------------------------------------------------- rendering


def render_table_program(adapter: FamilyAdapter, program: Iterable[Op]) -> list[RenderedOp]:
    """Call plans for a program of table-level operations, with the handle bindings the
    runner makes (``t<n>`` for the n-th table created). Every operation must succeed."""
    table_extra: dict[int, ops.Extra] = {}
    next_table = 0
    out: list[RenderedOp] = []
    for op in program:
        if op.kind not in _TABLE_KINDS:
            raise ProgramError(f"{op.kind} is not a table-level operation")
        plan = adapter.plan(op, table_extra)
        stmts = list(plan.stmts)
        if plan.creates_table is not None:
            handle = next_table
            next_table += 1
            stmts.append(Stmt(Name(plan.creates_table), bind=f"t{handle}"))
            if isinstance(op, ops.TableAllocate):
                table_extra[handle] = op.extra_hash
            elif isinstance(op, ops.TableFork):
                table_extra[handle] = table_extra.get(op.table)
        lines = [render(s) for s in stmts]
        if isinstance(op, ops.TableSwap):
            lines.append(_physical_mapping(op.src, op.dst))
        out.append(RenderedOp(op.kind, tuple(lines)))
    return out


def _physical_mapping(src: ops.Dev, dst: ops.Dev) -> str:
    """What vLLM 0.8's block manager does with a swap's mapping: hand the cache engine
    device-local (physical) ids, one ``get_physical_block_id`` per id."""
    return (f"_physical = [(alloc.get_physical_block_id(Device.{src.name}, s), "
            f"alloc.get_physical_block_id(Device.{dst.name}, d)) for s, d in mapping.items()]")


_TABLE_KINDS = frozenset(cls.kind for cls in ops.TABLE_OPS)


def render_log(log: Iterable[Step]) -> list[RenderedOp]:
    """A runner's log (any operations), as the reproducer prints it; failed steps guarded."""
    return [RenderedOp(step.op.kind, tuple(render(s) for s in step.stmts),
                       step.outcome.error is not None) for step in log]


def compile_table_program(target: Target, config: Config, program: Sequence[Op],
                          name: str = "trace", *, timed_variant: bool = True,
                          breaks: Iterable[int] | None = None,
                          chunk: int = CHUNK) -> CompiledProgram:
    """``program`` rendered for ``target``; chunks end only at ``breaks`` (if given)."""
    rendered = render_table_program(target.adapter(config), program)
    return build(target, config, rendered, name, timed_variant=timed_variant, breaks=breaks,
                 chunk=chunk)


def compile_log(target: Target, config: Config, log: Sequence[Step], name: str = "log",
                *, timed_variant: bool = False) -> CompiledProgram:
    return build(target, config, render_log(log), name, timed_variant=timed_variant)


# --------------------------------------------------------------------------- probes


def free_counts(env: dict[str, Any]) -> tuple[int, int]:
    """(GPU, CPU) free counts of the allocator a run's namespace holds."""
    alloc, device = env["alloc"], env["Device"]
    return int(alloc.get_num_free_blocks(device.GPU)), int(alloc.get_num_free_blocks(device.CPU))


def free_counts_at(program: CompiledProgram, points: Sequence[int]) -> list[tuple[int, int]]:
    """(GPU, CPU) free counts after the first ``p`` operations for each ``p`` in ``points``,
    from one untimed run on a fresh allocator (compiled anew, with a marker before every
    operation: for locating failures). An operation that raises becomes a
    :class:`ProgramError` naming it."""
    wanted = sorted(set(points))
    probe = (f"{_PROBE}((alloc.get_num_free_blocks(Device.GPU), "
             "alloc.get_num_free_blocks(Device.CPU)))")
    env = program.fresh_env()
    seen: list[tuple[int, int]] = []
    env[_PROBE] = seen.append
    cursor = 0
    rendered = program.rendered
    for start in range(0, len(rendered) + 1, CHUNK):
        out: list[str] = []
        for index in range(start, min(start + CHUNK, len(rendered) + 1)):
            while cursor < len(wanted) and wanted[cursor] == index:
                out.append(probe)
                cursor += 1
            if index < len(rendered):
                out.append(f"{_AT} = {index}")
                out += _guarded(rendered[index])
        env[_AT] = start
        try:
            exec(compile("\n".join(out) + "\n", f"<probe[{start}]>", "exec"), env)
        except Exception as exc:
            at = int(env[_AT])
            raise ProgramError(f"operation {at} ({rendered[at].kind}) raised "
                               f"{_failure(exc)}") from exc
    by_point = dict(zip(wanted, seen, strict=True))
    return [by_point[p] for p in points]


def clock_overhead_ns(samples: int = 20_000, clock: Callable[[], int] = CLOCK) -> float:
    """Median cost of one clock reading as the timed variant makes it (best of 5)."""
    code = compile("\n".join([TICK] * samples) + "\n", "<clock>", "exec")
    best = float("inf")
    for _ in range(5):
        stamps: list[int] = []
        env: dict[str, Any] = {_CLOCK: clock, _RECORD: stamps.append}
        with no_gc():
            exec(code, env)
        gaps = sorted(b - a for a, b in pairwise(stamps))
        best = min(best, float(gaps[len(gaps) // 2]))
    return best


def merge_min(results: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Per-kind best over several timed runs."""
    out: dict[str, float] = {}
    for result in results:
        for kind, seconds in result.items():
            out[kind] = min(out.get(kind, float("inf")), seconds)
    return out
