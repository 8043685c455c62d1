"""One fuzz input, end to end: decode it against a target one operation at a time, run each
operation through the runner, and judge it with the oracle.

Contract: :func:`execute` never raises for anything the target does; a broken invariant, or a
misbehaviour the runner itself reports (its ``Violation``; the outcome list then stops one
short of the program), comes back as ``Execution.violation`` located at its step, and a
program the oracle can no longer judge (``OutOfContract``, including ``Inconclusive``) ends
early with the reason in ``stopped``. Exceptions that escape are bugs of the suite itself
(model, runner, decoder).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fuzz.families.v0.decoder import MAX_OPS, Decoder, Level
from models.core.invariants import Violation
from models.families.v0.capabilities import Config
from models.families.v0.operations import Dev, Op, Outcome, Snapshot
from models.families.v0.oracle import Oracle, OutOfContract
from properties.core.targets import Target
from properties.families.v0.runner import Runner

Feature = tuple[object, ...]

#: Upper ends of the size classes in features: exact up to 4, then long, then past the
#: recursion limit (the decoder's longest chains).
SIZE_RUNGS: tuple[int, ...] = (0, 1, 2, 3, 4, 16, 128, 1000)


def size_rung(n: int) -> int:
    """The smallest rung ``>= n``, or one past the last (the class of chains deeper than
    CPython's default recursion limit)."""
    return next((r for r in SIZE_RUNGS if n <= r), SIZE_RUNGS[-1] + 1)


@dataclass
class Execution:
    """What happened to one input: the program run, its outcomes, and the verdict."""

    level: Level
    config: Config
    program: list[Op] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    violation: Violation | None = None
    stopped: str | None = None
    features: set[Feature] = field(default_factory=set)
    op_starts: list[int] = field(default_factory=list)
    consumed: int = 0
    runner: Runner | None = None

    @property
    def failed(self) -> bool:
        return self.violation is not None


def execute(data: bytes, target: Target, level: Level, *, max_ops: int = MAX_OPS) -> Execution:
    """Decode ``data`` against ``target`` and judge every step."""
    decoder = Decoder(data, level, target.caps, max_ops=max_ops)
    config = decoder.config
    result = Execution(level, config)
    oracle = Oracle(config)
    try:  # a misbehaving factory is a verdict too
        runner = result.runner = Runner(target, config)
        oracle.initial_check(runner.snapshot())
        decoder.use_adapter(**adapter_features(runner))
    except Violation as violation:
        result.violation = violation
        return result
    previous = "start"
    while (op := decoder.next_op(oracle)) is not None:
        try:
            outcome, snapshot = runner.execute(op)
        except Violation as violation:  # the runner's own verdict: the target misbehaved
            result.program.append(op)
            result.violation = violation if violation.op is not None else \
                violation.at(op, len(result.program) - 1)
            result.features.add(("violation", violation.family.value, op.kind))
            break
        result.program.append(op)
        result.outcomes.append(outcome)
        _note_features(result.features, previous, op, outcome, snapshot, len(oracle.worlds))
        previous = op.kind
        try:
            oracle.step(op, outcome, snapshot)
        except Violation as violation:
            result.violation = violation.at(op, len(result.program) - 1)
            result.features.add(("violation", violation.family.value, op.kind))
            break
        except OutOfContract as why:
            result.stopped = f"{type(why).__name__}: {why}"
            break
    result.op_starts = decoder.op_starts
    result.consumed = decoder.src.consumed
    return result


def decodable_kinds(target: Target, level: Level) -> frozenset[str]:
    """The operation kinds the decoder can produce against ``target`` (its capabilities, and
    whether its adapter finds the engine's trackers): what a seed corpus should cover."""
    runner = execute(b"", target, level).runner
    features = adapter_features(runner) if runner is not None else {}
    return Decoder(b"", level, target.caps, **features).kinds()


def adapter_features(runner: Runner) -> dict[str, bool]:
    """What the decoder offers beyond the capabilities: the API the target's adapter finds
    (keyword arguments of :meth:`Decoder.use_adapter`)."""
    adapter = runner.adapter
    return {"trackers": adapter.tracker_module() is not None,
            "block_info": bool(getattr(adapter, "has_block_info", False)),
            "hash_recompute": bool(getattr(adapter, "has_hash_recompute", False)),
            "evictor": bool(getattr(adapter, "has_evictor", False)),
            "refcount": bool(getattr(adapter, "has_refcount", False)),  # refcount level
            "device_calls": bool(getattr(adapter, "has_device_calls", False)),  # device calls
            "construct": bool(getattr(adapter, "has_construct", False)),  # construction
            # create takes hash_function (``InjectedHash``)
            "injected_hash": bool(getattr(adapter, "has_injected_hash", False))}


def _note_features(out: set[Feature], previous: str, op: Op, outcome: Outcome,
                   snapshot: Snapshot, worlds: int) -> None:
    """Behavioural coverage for the built-in engine: what each step did, not which lines ran
    (an input that makes a step behave in a new way is kept)."""
    err = outcome.error.value if outcome.error is not None else "ok"
    out.add((op.kind, err))
    out.add((previous, op.kind))
    if outcome.cows:
        out.add((op.kind, "cow", min(len(outcome.cows), 3)))
    if outcome.new_blocks:
        out.add((op.kind, "new", size_rung(len(outcome.new_blocks))))
    value = outcome.value
    if isinstance(value, list):
        out.add((op.kind, "len", min(len(value), 4)))
    elif isinstance(value, bool | int | float):
        out.add((op.kind, "value", round(float(value), 1)))
    if outcome.admitted is not None:
        out.add((op.kind, "admitted", outcome.admitted))
    for dev in Dev:
        out.add((op.kind, dev.value, "free0", snapshot.free.get(dev) == 0))
    if snapshot.evictable is not None:
        out.add((op.kind, "evictable", min(len(snapshot.evictable.get(Dev.GPU, ())), 3)))
    if snapshot.evictor is not None:  # evictor level: how many candidates
        out.add((op.kind, "evictor", min(snapshot.evictor.num_blocks, 4)))
    if snapshot.refcount is not None:  # refcount level: the highest count, pairs pending
        shown = snapshot.refcount
        out.add((op.kind, "refcount", min(max(shown.counts.values(), default=0), 3),
                 None if shown.pending is None else min(len(shown.pending), 2)))
    if worlds > 1:
        out.add((op.kind, "hidden-choice"))
