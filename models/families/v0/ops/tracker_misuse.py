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

Sequence-tracker calls the contract says a tracker must refuse (docs/API.md §10), each
with a typed error and nothing changed (targets with typed errors only):

- ``SeqLostBlocks``: the Aphrodite ``get_cached_computed_blocks_and_update`` of a sequence
  whose computed-id list (no gap yet) covers more blocks than the ids it is now given hold,
  less the last: the sequence lost blocks since the last call (an engine that re-allocated
  it without removing it from the tracker). The list must stay as it was.
- ``SeqCachedTokensUnsized``: the vLLM ``get_num_cached_tokens`` on a tracker built without a
  ``block_size`` (the Aphrodite construction): it has no block size to hash by.

Both are misuse by construction: a program that asks them in any other state left the
contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Invariant
from models.families.v0.invariants import Family
from models.families.v0.ops import common
from models.families.v0.ops.base import Op, Out
from models.families.v0.ops.values import Dev
from models.families.v0.tracker_state import SeqEntry

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model
    from models.families.v0.blocks import TableRec

#: The trackers :class:`SeqTrackerEdit` names.
TRACKERS: tuple[str, ...] = ("computed", "access")


@dataclass(frozen=True, slots=True)
class SeqTrackerEdit(Op):
    """``add_seq(table)`` (``add``) or ``remove_seq(table)`` on one tracker alone
    (``tracker``: ``"computed"``, the Aphrodite ``ComputedBlocksTracker``, or ``"access"``)."""

    kind: ClassVar[str] = "seq_tracker_edit"
    misuse_family: ClassVar[Invariant] = Family.COMPUTED  # a tracker add/remove refused
    table: int
    tracker: str
    add: bool

    def misuse(self, m: Model) -> str | None:
        if not m.seqs.started:
            raise Out("the trackers were not created")
        t = m.tables.get(self.table)
        if t is None:
            raise Out(f"table handle {self.table} never existed")
        if self.tracker not in TRACKERS:
            raise Out(f"unknown tracker {self.tracker!r}")
        if self.add and not t.live:
            raise Out(f"table {self.table} was freed: its sequence is not scheduled again")
        e = m.seqs.entries.get(self.table)
        if self.tracker == "access":
            held = e is not None and e.access
        else:
            if self.add and not m.caps.aphrodite_api:
                raise Out("the computed tracker's add_seq is Aphrodite-generation only")
            held = e is not None and (e.computed is not None or e.frozen is not None)
            if self.add:
                held = e is not None and e.computed is not None
            elif not held and not m.pc and m.caps.tracker_caching_switch:
                return None  # caching disabled: removing an unknown sequence is ignored
        name = f"{self.tracker} tracker: sequence {self.table}"
        if self.add and held:
            return f"{name} is already tracked"
        if not self.add and not held:
            return f"{name} is not tracked"
        return None

    def step(self, m: Model) -> None:
        e = m.seqs.entries.setdefault(self.table, SeqEntry())
        if self.tracker == "access":
            e.access, e.last = self.add, None
        elif self.add:
            e.computed, e.gap = [], False
        else:
            e.computed, e.gap, e.frozen = None, False, None
        if e.empty:
            del m.seqs.entries[self.table]


def _damaged_left_open(m: Model, key: int, kind: str) -> None:
    """A damaged table's tracker questions are left open (``table_misuse``)."""
    t = m.tables.get(key) if isinstance(key, int) else None
    if t is not None:
        common.left_open_if_damaged(m, t, kind)


def _running(m: Model, key: int) -> TableRec:
    t = m.tables.get(key)
    if t is None or not t.live or common.is_damaged(m, t):
        raise Out(f"table {key} is not a running sequence")
    if t.device is not Dev.GPU or t.window is not None or not t.blocks:
        raise Out(f"table {key}: the trackers ask about GPU tables without a window")
    return t


@dataclass(frozen=True, slots=True)
class SeqLostBlocks(Op):
    """Aphrodite ``get_cached_computed_blocks_and_update(table, other.physical_block_ids)``:
    the sequence asked with the ids of a table holding fewer blocks than its computed-id list
    covers (it lost blocks since the last call). Always a misuse
    ."""

    kind: ClassVar[str] = "seq_lost_blocks"
    misuse_family: ClassVar[Invariant] = Family.COMPUTED
    table: int
    other: int

    def misuse(self, m: Model) -> str | None:
        _damaged_left_open(m, self.table, self.kind)
        if not m.caps.aphrodite_api:
            raise Out("get_cached_computed_blocks_and_update is Aphrodite-generation only")
        _running(m, self.table)
        other = _running(m, self.other)
        e = m.seqs.entries.get(self.table) if m.seqs.started else None
        if e is None or e.computed is None:
            raise Out(f"sequence {self.table} is not in the computed tracker")
        if e.gap:
            raise Out("a list with a gap is returned as it is")
        if len(e.computed) <= len(other.blocks) - 1:
            raise Out(f"table {self.other} holds enough blocks for the list")
        return (f"sequence {self.table}'s computed list covers {len(e.computed)} blocks; "
                f"table {self.other} gives it {len(other.blocks)} ids (it lost blocks)")


@dataclass(frozen=True, slots=True)
class SeqCachedTokensUnsized(Op):
    """vLLM ``get_num_cached_tokens(seq)`` (the table's tokens) on a fresh
    ``ComputedBlocksTracker(alloc)`` built without a ``block_size`` (the Aphrodite
    construction). Always a misuse ."""

    kind: ClassVar[str] = "seq_cached_tokens_unsized"
    misuse_family: ClassVar[Invariant] = Family.COMPUTED
    table: int

    def misuse(self, m: Model) -> str | None:
        _damaged_left_open(m, self.table, self.kind)
        if not m.caps.vllm_api:
            raise Out("get_num_cached_tokens is vLLM-generation only")
        _running(m, self.table)
        return "get_num_cached_tokens on a tracker built without a block_size"
