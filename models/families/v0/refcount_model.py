"""Semantics of the refcount-level operations (``REFCOUNT_OPS``; docs/API.md §7).

The model is the counter, id -> count (every id of ``RefNew`` at 0, duplicates merged), and the
copy-on-write pairs recorded since the last ``clear_cows``. ``incr``/``decr`` return the new
count, ``get`` the count (through the read-only view too); ``is_appendable`` is true iff the
stand-in block holds no id or its id's count is <= 1 (the tracker sees the counter through the
view, so it follows every ``incr``/``decr``); ``record_cow`` appends, ``clear_cows`` returns the
pairs in order and starts afresh. After every step ``get`` of every id must equal the model,
and the tracker's pending pairs too where the target shows them.

Misuse: an unknown id, or a bool id (it aliases an int key; a ``BlockId`` is an int) for
``incr``/``decr``/``get``/``is_appendable``; ``decr`` at 0; ``incr``/``decr`` on the
read-only view; ``record_cow`` with a ``None`` id. A target claiming typed errors must refuse it
with one and, if it claims atomicity, change nothing (ATOMIC); for other targets it is out of
contract. Any operation but ``RefNew`` before the first ``RefNew`` is out of contract.

Families: RC (a count returned or shown wrong, refcount misuse accepted), COW (an
``is_appendable`` answer or the recorded pairs wrong, a ``None`` pair accepted), ATOMIC (a
refused call changed the counter or the pairs), CRASH (an untyped error).
"""

from __future__ import annotations

from models.core.invariants import Invariant
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Capabilities
from models.families.v0.component_model import ComponentModel
from models.families.v0.contract import OutOfContract
from models.families.v0.invariants import Family
from models.families.v0.operations import Op, RefcountState

F = Family

_COUNTER_OPS = (ops.RefIncr, ops.RefDecr, ops.RefGet)


class RefcountModel(ComponentModel[RefcountState]):
    """The target's standalone counter and tracker (see the module docstring)."""

    COMPONENT = "the counter or tracker"

    def __init__(self, caps: Capabilities) -> None:
        super().__init__(caps)
        self.counts: dict[int, int] | None = None  # None until the first ``RefNew``
        self.cows: list[tuple[int, int]] = []

    @property
    def built(self) -> bool:
        return self.counts is not None

    def ids(self) -> list[int]:
        """The counter's ids, sorted (empty before ``RefNew``)."""
        return sorted(self.counts or ())

    def _id_misuse(self, block_id: object) -> str | None:
        if type(block_id) is not int:
            return f"id {block_id!r} is not an int (a bool aliases an int key)"
        if block_id not in (self.counts or {}):
            return f"unknown id {block_id}"
        return None

    def misuse(self, op: Op) -> str | None:
        """Why ``op`` is misuse in the current state (None: valid); raises
        :class:`OutOfContract` for what the contract does not cover."""
        if isinstance(op, ops.RefNew):
            return None
        if self.counts is None:
            raise OutOfContract(f"{op.kind} before any ref_new: there is no counter")
        if isinstance(op, ops.RefIncr | ops.RefDecr) and op.readonly:
            return f"{op.kind} on the read-only view"
        if isinstance(op, _COUNTER_OPS):
            bad = self._id_misuse(op.block_id)
            if bad is not None:
                return f"{op.kind}: {bad}"
            if isinstance(op, ops.RefDecr) and self.counts[op.block_id] == 0:
                return f"decr of id {op.block_id} at refcount 0"
            return None
        if isinstance(op, ops.CowAppendable) and op.block_id is not None:
            bad = self._id_misuse(op.block_id)
            return None if bad is None else f"is_appendable: {bad}"
        if isinstance(op, ops.CowRecord) and (op.src_id is None or op.dst_id is None):
            return f"record_cow({op.src_id}, {op.dst_id}) with a None id"
        return None

    def family(self, op: Op) -> Invariant:
        """Who is wrong when ``op`` misbehaves: the counter (RC) or the tracker (COW)."""
        return F.RC if isinstance(op, _COUNTER_OPS) else F.COW

    def comparable(self) -> bool:
        return self.counts is not None

    def _apply(self, op: Op, value: object) -> None:
        if isinstance(op, ops.RefNew):
            self.counts = dict.fromkeys(op.ids, 0)
            self.cows = []
            return
        counts = self.counts
        if counts is None:  # unreachable: ``misuse`` refused it
            raise OutOfContract(f"{op.kind} before any ref_new")
        want: object
        if isinstance(op, ops.RefIncr | ops.RefDecr):
            want = counts[op.block_id] + (1 if isinstance(op, ops.RefIncr) else -1)
            counts[op.block_id] = want
            if value != want:
                self._flag(F.RC, f"{op.kind}({op.block_id}) returned the wrong count",
                           expected=want, observed=value)
        elif isinstance(op, ops.RefGet):
            want = counts[op.block_id]
            if value != want:
                view = " on the read-only view" if op.readonly else ""
                self._flag(F.RC, f"get({op.block_id}){view}", expected=want, observed=value)
        elif isinstance(op, ops.CowAppendable):
            want = op.block_id is None or counts[op.block_id] <= 1
            if value is not want:
                shown = "None" if op.block_id is None else \
                    f"{op.block_id} (refcount {counts[op.block_id]})"
                self._flag(F.COW, f"is_appendable of a block with id {shown}", expected=want,
                           observed=value)
        elif isinstance(op, ops.CowRecord):
            if op.src_id is not None and op.dst_id is not None:
                self.cows.append((op.src_id, op.dst_id))
        elif isinstance(op, ops.CowClear):
            want = [list(pair) for pair in self.cows]
            self.cows = []
            if value != want:
                self._flag(F.COW, "clear_cows returned other pairs", expected=want,
                           observed=value)

    def _compare(self, after: RefcountState) -> None:
        counts = self.counts or {}
        shown = dict(after.counts)
        if shown != counts:
            wrong = sorted(i for i in counts.keys() | shown.keys()
                           if counts.get(i) != shown.get(i))
            self._flag(F.RC, f"the counts get() shows of ids {wrong} after the step",
                       expected={i: counts.get(i) for i in wrong},
                       observed={i: shown.get(i) for i in wrong})
        if after.pending is not None and list(after.pending) != self.cows:
            self._flag(F.COW, "the tracker's pending copy-on-write pairs", expected=self.cows,
                       observed=list(after.pending))
