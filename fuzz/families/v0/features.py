"""What the v0 family offers the fuzz core beyond the decoder: behavioural coverage of a
judged step (the built-in engine keeps an input that makes a step behave in a new way) and the
adapter features the decoder uses."""

from __future__ import annotations

from collections.abc import Iterator

from fuzz.core.execution import Feature, size_rung
from models.families.v0.operations import Dev, Op, Outcome, Snapshot
from models.families.v0.oracle import Oracle
from properties.families.v0.runner import Runner


def step_features(previous: str, op: Op, outcome: Outcome, snapshot: Snapshot,
                  oracle: Oracle) -> Iterator[Feature]:
    """What one step did, not which lines ran: its kind and error, the kind before it, the
    copy-on-writes, blocks made and values returned (size classes), free and evictable
    counts, the evictor and refcount levels' views, and hidden choices the model still
    carries."""
    err = outcome.error.value if outcome.error is not None else "ok"
    yield (op.kind, err)
    yield (previous, op.kind)
    if outcome.cows:
        yield (op.kind, "cow", min(len(outcome.cows), 3))
    if outcome.new_blocks:
        yield (op.kind, "new", size_rung(len(outcome.new_blocks)))
    value = outcome.value
    if isinstance(value, list):
        yield (op.kind, "len", min(len(value), 4))
    elif isinstance(value, bool | int | float):
        yield (op.kind, "value", round(float(value), 1))
    if outcome.admitted is not None:
        yield (op.kind, "admitted", outcome.admitted)
    for dev in Dev:
        yield (op.kind, dev.value, "free0", snapshot.free.get(dev) == 0)
    if snapshot.evictable is not None:
        yield (op.kind, "evictable", min(len(snapshot.evictable.get(Dev.GPU, ())), 3))
    if snapshot.evictor is not None:  # evictor level: how many candidates
        yield (op.kind, "evictor", min(snapshot.evictor.num_blocks, 4))
    if snapshot.refcount is not None:  # refcount level: the highest count, pairs pending
        shown = snapshot.refcount
        yield (op.kind, "refcount", min(max(shown.counts.values(), default=0), 3),
               None if shown.pending is None else min(len(shown.pending), 2))
    if len(oracle.worlds) > 1:
        yield (op.kind, "hidden-choice")

def adapter_features(runner: Runner) -> dict[str, bool]:
    """What the decoder offers beyond the capabilities: the API the target's adapter finds
    (keyword arguments of :meth:`fuzz.families.v0.decoder.Decoder.use_adapter`)."""
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
