"""What one step of the model is judged against: the operation, what the target reported, and
the violations found so far. Also reads the target's visible choices (ids in the snapshot,
copy-on-write pairs) as *hints* the model follows whenever they are permitted."""

from __future__ import annotations

from dataclasses import dataclass, field

from models.core.choice import Chooser
from models.core.invariants import Invariant, Measure, Violation
from models.families.v0.ops.base import Op
from models.families.v0.ops.values import Outcome, Snapshot


@dataclass(slots=True)
class Context:
    op: Op
    outcome: Outcome
    after: Snapshot
    chooser: Chooser
    found: list[Violation] = field(default_factory=list)
    override: Invariant | None = None  # e.g. ATOMIC: any difference after a failed op
    cows: dict[int, int] = field(default_factory=dict)  # reported src -> dst (first pair)
    expected_cows: list[tuple[int, int]] = field(default_factory=list)
    hint_ids: set[int] = field(default_factory=set)  # ids the target shows for this op
    swapping: bool = False
    # For the shadow memory: key -> observed id (None: ended), and key -> first written slot.
    moved: dict[int, int | None] = field(default_factory=dict)
    writes: dict[int, int] = field(default_factory=dict)
    ended_blocks: list[int] = field(default_factory=list)
    ended_tables: list[int] = field(default_factory=list)
    forget: list[int] = field(default_factory=list)  # dead internal records to drop

    def __post_init__(self) -> None:
        for src, dst in self.outcome.cows:
            self.cows.setdefault(src, dst)
            self.hint_ids.add(dst)

    def flag(self, family: Invariant, message: str, expected: object = None,
             observed: object = None, *, root_cause: bool = False,
             measure: Measure | None = None) -> None:
        """Record a violation; ``root_cause`` ones (an id handed to a second owner) outrank
        the data-plane damage they cause; ``measure``: the finding's size, if it has one."""
        fam = self.override or family
        if self.override is not None:
            message = f"failed operation changed state ({family.value}): {message}"
        found = Violation(fam, message, expected=expected, observed=observed, measure=measure)
        found.root_cause = root_cause  # type: ignore[attr-defined]
        self.found.append(found)

    def block_hint(self, handle: int) -> int | None:
        """The id the target shows for a program block handle (program handles are >= 0)."""
        value = self.after.blocks.get(handle)
        return value if isinstance(value, int) else None

    def table_hint(self, table: int, index: int) -> int | None:
        ids = self.after.tables.get(table, ())
        value = ids[index] if index < len(ids) else None
        return value if isinstance(value, int) else None

    def note_hints(self, ids: object) -> None:
        if isinstance(ids, tuple | list):
            self.hint_ids.update(i for i in ids if isinstance(i, int))
        elif isinstance(ids, int):
            self.hint_ids.add(ids)

    def write(self, key: int, observed: int | None, first_slot: int | None) -> None:
        """Record that block ``key`` now shows ``observed`` and wrote from ``first_slot``."""
        self.moved[key] = observed
        if first_slot is not None:
            self.writes[key] = min(first_slot, self.writes.get(key, first_slot))
