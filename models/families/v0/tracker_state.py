"""What the engine-side sequence trackers hold per sequence (a table handle is its seq_id).

``ComputedBlocksTracker`` keeps, per sequence, the Aphrodite computed-id list with its gap flag
and the vLLM frozen cached-token count; ``LastAccessBlocksTracker`` keeps the last access time.
Kept apart from the semantics (``models.families.v0.ops.trackers``) so a model world can clone it
cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(slots=True)
class SeqEntry:
    """One sequence's entries; ``access`` is False once the last-access tracker dropped it."""

    access: bool = False
    last: float | None = None  # update_last_access time; None until the first one
    computed: list[int] | None = None  # Aphrodite: the cached computed-id list
    gap: bool = False  # Aphrodite: the list stopped growing at a gap
    frozen: int | None = None  # vLLM: the last get_num_cached_tokens result

    @property
    def empty(self) -> bool:
        return not self.access and self.computed is None and self.frozen is None


@dataclass(slots=True)
class SeqState:
    """The trackers of one allocator: created by ``TrackerStart``, entries per table handle."""

    started: bool = False
    entries: dict[int, SeqEntry] = field(default_factory=dict)
    # stale ids: the id each freed block handle held when it was freed (what an engine's
    # stale id list still names; ``MarkStaleIds``). Filled by the oracle on each ``Free``.
    freed_ids: dict[int, int] = field(default_factory=dict)

    def clone(self) -> SeqState:
        return SeqState(self.started, {
            k: replace(e, computed=None if e.computed is None else list(e.computed))
            for k, e in self.entries.items()}, dict(self.freed_ids))
