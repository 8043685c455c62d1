"""Running a mutant through the conformance suite, and shrinking what caught it.

A *check* is one of the suite's state machines (``block``, ``sequence``, ``evictor``,
``refcount``) run with ``run_state_machine_as_test`` under a fixed budget (examples x steps with
a fixed seed), or the ``long_chain`` program replayed with ``properties.replay.run_program``.

Determinism: the same seed must give the same examples whatever else the process imported.
Hypothesis (6.1xx) also draws, now and then, integer constants collected from every local
(non-test) module loaded so far; which modules that is depends on test order and xdist
distribution, so a fixed seed alone is not enough (a mutant caught in one run was missed in
another). Checks therefore run with that pool empty (:func:`fixed_constants`).

The machines run without Hypothesis's shrink phase (like the suite's ``mutation`` profile):
Hypothesis re-validates the machines' per-step strategies on every replay, so shrinking costs
10-100 s per mutant. Instead the failing program (the runner log at the first violation) is
shrunk here by replaying candidate programs through ``run_program``: drop a run of operations
(with every later operation that uses a handle they created), renumber the handles, and keep
the candidate if it still fails with the same family. Every kept program is a real,
replayable counterexample; its length is the reported step count.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, Verbosity, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from models import operations as ops
from models.capabilities import Config
from models.families import Family, Violation
from models.operations import Op
from properties.determinism import fixed_constants
from properties.machines.base import OracleMachine
from properties.machines.block_level import BlockLevelMachine
from properties.machines.evictor_level import EvictorLevelMachine
from properties.machines.refcount_level import RefcountLevelMachine  # refcount level
from properties.machines.sequence_level import SequenceLevelMachine
from properties.replay import run_program
from properties.runner import Runner
from properties.selection import use
from properties.targets import Target
from tests.zoo.broken import BLOCK, EVICTOR, LONG_CHAIN, REFCOUNT, SEQUENCE

MACHINES: dict[str, type[OracleMachine]] = {
    BLOCK: BlockLevelMachine,
    SEQUENCE: SequenceLevelMachine,
    EVICTOR: EvictorLevelMachine,
    REFCOUNT: RefcountLevelMachine,  # refcount level
}
#: Past the ~1000-frame recursion limit (upstream fails at 2000 blocks, 32k tokens at 16).
LONG_CHAIN_BLOCKS = 2_000


@dataclass(frozen=True, slots=True)
class Budget:
    """A fixed search budget with its own seed: the same examples on every run (schedules
    with different seeds explore independently)."""

    max_examples: int
    steps: int
    seed: int = 0

    def settings(self) -> settings:
        return settings(
            max_examples=self.max_examples,
            stateful_step_count=self.steps,
            derandomize=False,
            database=None,
            deadline=None,
            report_multiple_bugs=False,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
        )


@dataclass(frozen=True, slots=True)
class Catch:
    """A check that caught a target: the violation and program as found, and shrunk."""

    check: str
    found: Violation  # as raised by the check
    config: Config
    program: tuple[Op, ...]  # shrunk; replaying it raises ``violation``
    violation: Violation
    raw_steps: int  # runner log length at the first violation
    examples: int  # examples the check ran up to the first violation
    detect_seconds: float  # check start to the first violation
    check_seconds: float  # the whole check (detection plus Hypothesis's final replay)
    shrink_seconds: float

    @property
    def family(self) -> Family:
        return self.found.family

    @property
    def steps(self) -> int:
        """Length of the shrunk counterexample."""
        return len(self.program)


@contextmanager
def _quiet() -> Iterator[None]:
    """The bundled allocator logs a warning on every refused ``reset_prefix_cache``."""
    logger = logging.getLogger("prefixcache")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def long_chain(target: Target, blocks: int = LONG_CHAIN_BLOCKS) -> tuple[Config, list[Op]]:
    """One chain of ``blocks`` full blocks (block size 1), then a fork of its last block."""
    config = Config(1, blocks, 0, target.caps)
    chunks = tuple((i,) for i in range(blocks))
    return config, [ops.AllocateImmutableChain(None, chunks), ops.Fork(blocks - 1)]


def run_check(check: str, target: Target, budget: Budget) -> Catch | None:
    """Run one check against ``target``; the catch, or None if it passed. ``target`` stays
    selected afterwards (callers restore the previous one)."""
    started = time.perf_counter()
    if check == LONG_CHAIN:
        config, program = long_chain(target)
        try:
            with _quiet():
                run_program(target, config, program)
        except Violation as violation:
            seconds = time.perf_counter() - started
            return _shrunk(check, target, violation, config, program, 1, seconds, seconds)
        return None
    found: list[_FirstFailure] = []
    examples = [0]

    class Probe(MACHINES[check]):  # type: ignore[valid-type,misc]
        """Counts examples and keeps the first failing program (nothing else changes)."""

        def __init__(self) -> None:
            super().__init__()
            examples[0] += 1

        def fail(self, violation: Violation) -> None:
            if not found:
                found.append(_FirstFailure(time.perf_counter() - started, examples[0],
                                           self.config, [s.op for s in self.runner.log]))
            super().fail(violation)

    use(target)
    try:
        with _quiet(), fixed_constants():
            run_state_machine_as_test(seed(budget.seed)(Probe), settings=budget.settings())
    except Violation as violation:
        if not found:
            raise
        first = found[0]
        return _shrunk(check, target, violation, first.config, first.program, first.examples,
                       first.seconds, time.perf_counter() - started)
    return None


@dataclass(frozen=True, slots=True)
class _FirstFailure:
    seconds: float
    examples: int
    config: Config
    program: list[Op]


def _shrunk(check: str, target: Target, found: Violation, config: Config,
            program: Sequence[Op], examples: int, detect: float, total: float) -> Catch:
    started = time.perf_counter()
    config, shrunk, violation = shrink_with_pools(target, config, program, found)
    return Catch(check, found, config, tuple(shrunk), violation, len(program), examples, detect,
                 total, time.perf_counter() - started)


# --------------------------------------------------------------------------- shrinking


def _replay(target: Target, config: Config, program: Sequence[Op],
            family: Family) -> Violation | None:
    """The violation of ``family`` that ``program`` raises, if any (anything else: None)."""
    try:
        with _quiet():
            run_program(target, config, program)
    except Violation as violation:
        return violation if violation.family is family else None
    except Exception:  # out of contract, or a candidate the oracle cannot judge
        return None
    return None


def _handles(target: Target, config: Config,
             program: Sequence[Op]) -> list[tuple[frozenset[int], frozenset[int]]]:
    """Block and table handles each operation created when ``program`` ran."""
    runner = Runner(target, config)
    made: list[tuple[frozenset[int], frozenset[int]]] = []
    with _quiet():
        for op in program:
            try:
                outcome, _ = runner.execute(op)
            except Violation:  # the target cannot show its state: nothing after it counts
                break
            tables = frozenset(() if outcome.new_table is None else (outcome.new_table,))
            made.append((frozenset(outcome.new_blocks), tables))
    made += [(frozenset(), frozenset())] * (len(program) - len(made))
    return made


_BLOCK_FIELDS = ("prev", "block", "blocks")


def _uses(op: Op) -> tuple[set[int], set[int]]:
    """The block and table handles ``op`` names, those of the call it wraps (``Malformed``)
    included."""
    blocks: set[int] = set()
    for name in _BLOCK_FIELDS:
        value = getattr(op, name, None)
        if isinstance(value, int):
            blocks.add(value)
        elif isinstance(value, tuple):
            blocks.update(value)
    table = getattr(op, "table", None)
    tables = {table} if isinstance(table, int) else set()
    call = getattr(op, "call", None)
    if isinstance(call, Op):
        inner_blocks, inner_tables = _uses(call)
        blocks |= inner_blocks
        tables |= inner_tables
    return blocks, tables


def _renumber(op: Op, gone_blocks: list[int], gone_tables: list[int]) -> Op:
    def block(h: int) -> int:
        return h - sum(1 for g in gone_blocks if g < h)

    changes: dict[str, object] = {}
    for name in _BLOCK_FIELDS:
        value = getattr(op, name, None)
        if isinstance(value, int):
            changes[name] = block(value)
        elif isinstance(value, tuple):
            changes[name] = tuple(block(h) for h in value)
    table = getattr(op, "table", None)
    if isinstance(table, int):
        changes["table"] = table - sum(1 for g in gone_tables if g < table)
    call = getattr(op, "call", None)
    if isinstance(call, Op):
        changes["call"] = _renumber(call, gone_blocks, gone_tables)
    return dataclasses.replace(op, **changes) if changes else op


def _without(program: Sequence[Op], made: Sequence[tuple[frozenset[int], frozenset[int]]],
             start: int, stop: int) -> list[Op]:
    """``program`` minus operations ``start..stop-1`` and every later one that uses a handle
    a dropped operation created, with the remaining handles renumbered."""
    gone_blocks: set[int] = set()
    gone_tables: set[int] = set()
    kept: list[Op] = []
    for index, op in enumerate(program):
        blocks, tables = _uses(op)
        if start <= index < stop or blocks & gone_blocks or tables & gone_tables:
            gone_blocks |= made[index][0]
            gone_tables |= made[index][1]
        else:
            kept.append(op)
    drop_b, drop_t = sorted(gone_blocks), sorted(gone_tables)
    return [_renumber(op, drop_b, drop_t) for op in kept]


def shrink(target: Target, config: Config, program: Sequence[Op],
           found: Violation) -> tuple[list[Op], Violation]:
    """A shorter program failing with ``found``'s family (delta debugging, runs of halving
    length, to a fixpoint). Returns the program, cut at its failing step, and its violation."""
    family = found.family
    current = list(program)
    violation = _replay(target, config, current, family)
    if violation is None or violation.step is None:
        return current, found  # not replayable as a program: report it as found
    current = current[: violation.step + 1]
    made = _handles(target, config, current)
    size = max(1, len(current) // 2)
    while True:
        shrunk = False
        stop = len(current)
        while stop > 0:
            start = max(0, stop - size)
            candidate = _without(current, made, start, stop)
            result = _replay(target, config, candidate, family) if candidate else None
            if result is not None and result.step is not None:
                current, violation = candidate[: result.step + 1], result
                made = _handles(target, config, current)
                shrunk = True
            stop = min(start, len(current))
        if not shrunk:
            if size == 1:
                return current, violation
            size //= 2


#: Pools up to this many ids in all (the machines' configs) are shrunk; larger ones belong to
#: dedicated programs whose size is the point.
MAX_SHRUNK_POOL = 32


def shrink_with_pools(target: Target, config: Config, program: Sequence[Op],
                      found: Violation) -> tuple[Config, list[Op], Violation]:
    """:func:`shrink`, then the smallest GPU and CPU pools the shrunk program still fails on
    with the same family (a smaller pool needs fewer allocations to fill), shrinking the program
    again after each smaller pool. Returns the config, the program and its violation."""
    program, violation = shrink(target, config, program, found)
    if config.num_gpu_blocks + config.num_cpu_blocks > MAX_SHRUNK_POOL:
        return config, program, violation  # a dedicated program (long chain): its size is it
    gpu = [dataclasses.replace(config, num_gpu_blocks=n) for n in range(1, config.num_gpu_blocks)]
    for candidates in (gpu, None):
        if candidates is None:  # the CPU pool, once the GPU pool is final
            candidates = [dataclasses.replace(config, num_cpu_blocks=n)
                          for n in range(config.num_cpu_blocks)]
        for smaller in candidates:
            result = _replay(target, smaller, program, found.family)
            if result is not None and result.step is not None:
                config = smaller
                program, violation = shrink(target, config, program[: result.step + 1], result)
                break
    return config, program, violation
