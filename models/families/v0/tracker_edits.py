"""``SeqTrackerEdit``: ``add_seq`` / ``remove_seq`` on one engine tracker alone.

The trackers keep their sequences apart (``models.families.v0.tracker_state``): the last-access
tracker an access entry, the Aphrodite ``ComputedBlocksTracker`` a computed-id list, the vLLM one
(entries made on demand by ``get_num_cached_tokens``) the frozen count.

- add: refused (typed error, nothing changed) when that tracker already holds the sequence;
  else the sequence enters it empty. Adding to the computed tracker needs the Aphrodite
  ``add_seq``; only live tables are added.
- remove: refused when that tracker does not hold the sequence, except that a computed
  tracker with caching disabled (the naive allocator's engine) ignores it where the tracker
  has that switch (``Capabilities.tracker_caching_switch``: vLLM 0.8's ``enable_caching``;
  Aphrodite's tracker has none and refuses it, as for a caching allocator); else its entry
  (list, gap flag, frozen count; or access time) is dropped.
"""

from __future__ import annotations

from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.tracker_state import SeqEntry


class EditOut(Exception):
    """The program left the contract (the caller turns it into ``OutOfContract``)."""


def edit_misuse(m: Model, op: ops.SeqTrackerEdit) -> str | None:
    """Why ``op`` is misuse (None if valid); raises :class:`EditOut`."""
    if not m.seqs.started:
        raise EditOut("the trackers were not created")
    t = m.tables.get(op.table)
    if t is None:
        raise EditOut(f"table handle {op.table} never existed")
    if op.tracker not in ops.TRACKERS:
        raise EditOut(f"unknown tracker {op.tracker!r}")
    if op.add and not t.live:
        raise EditOut(f"table {op.table} was freed: its sequence is not scheduled again")
    e = m.seqs.entries.get(op.table)
    if op.tracker == "access":
        held = e is not None and e.access
    else:
        if op.add and not m.caps.aphrodite_api:
            raise EditOut("the computed tracker's add_seq is Aphrodite-generation only")
        held = e is not None and (e.computed is not None or e.frozen is not None)
        if op.add:
            held = e is not None and e.computed is not None
        elif not held and not m.pc and m.caps.tracker_caching_switch:
            return None  # caching disabled: removing an unknown sequence is ignored
    name = f"{op.tracker} tracker: sequence {op.table}"
    if op.add and held:
        return f"{name} is already tracked"
    if not op.add and not held:
        return f"{name} is not tracked"
    return None


def seq_tracker_edit(m: Model, op: ops.SeqTrackerEdit) -> None:
    e = m.seqs.entries.setdefault(op.table, SeqEntry())
    if op.tracker == "access":
        e.access, e.last = op.add, None
    elif op.add:
        e.computed, e.gap = [], False
    else:
        e.computed, e.gap, e.frozen = None, False, None
    if e.empty:
        del m.seqs.entries[op.table]
