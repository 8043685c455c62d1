"""The request level's specification: request progress and a shadow KV memory.

Every slot of every block holds the identity of the KV written there (the content it encodes:
the request's key inputs and its tokens through that position) and whether that KV was
*computed*. In the v1 flow the manager registers a block's hash when the block is scheduled,
but its KV is computed only when the step ends: a block handed out fresh holds no computed KV;
the tokens scheduled in a step are pending until ``EndStep`` commits them (a request preempted
inside the step drops its pending writes).

Contract checked against the target's own block tables (ids per group, 0 the null block):

* CONTENT: every running request reads back exactly its own tokens' KV through its tables
  (positions a sliding window still attends to), and a hit reads exactly its content;
* COMPUTED: a hit (``get_computed_blocks``) covers only KV that is computed, or pending in
  the open step (one forward writes every scheduled token's KV before attention reads it);
  it is aligned to every group's block size and leaves at least the last token to compute;
* TABLE: after ``allocate_slots`` every position to compute (plus lookahead) has a real block,
  and the request's tables start with its hit blocks;
* ATOMIC: ``allocate_slots`` returning None changes nothing but what skipping out-of-window
  blocks frees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from models.core.invariants import Invariant, Violation
from models.families.v1.request_invariants import ManagerInvariants as Family

NULL = 0


@dataclass
class ReqState:
    prompt: tuple[int, ...]
    outputs: list[int]
    salt: str | None
    lora: int | None
    tokens: list[int] = field(default_factory=list)
    computed: int = 0  # tokens whose KV the engine has computed (scheduler's counter)
    status: str = "waiting"  # waiting | running | preempted | finished
    scheduled: tuple[int, int] | None = None  # [start, end) scheduled in the open step

    def __post_init__(self) -> None:
        self.tokens = list(self.prompt)

    @property
    def live(self) -> bool:
        return self.status == "running"


class Identities:
    """Interns content identities: (salt, lora, tokens through a position) -> small int."""

    def __init__(self) -> None:
        self._ids: dict[tuple[object, ...], int] = {}

    def of(self, r: ReqState, pos: int) -> int:
        key = (r.salt, r.lora, tuple(r.tokens[: pos + 1]))
        return self._ids.setdefault(key, len(self._ids) + 1)


@dataclass
class Slot:
    ident: int
    computed: bool


class KVShadow:
    """Block id -> slot -> what the KV there is; pending writes of the open step."""

    def __init__(self) -> None:
        self.slots: dict[int, dict[int, Slot]] = {}
        self.pending: dict[int, dict[tuple[int, int], int]] = {}  # req -> (block, slot) -> id

    def handed_out(self, block: int) -> None:
        """A fresh block: whatever it holds is stale, nothing computed."""
        for s in self.slots.get(block, {}).values():
            s.computed = False

    def schedule(self, req: int, writes: dict[tuple[int, int], int]) -> None:
        self.pending[req] = writes

    def drop(self, req: int) -> None:
        self.pending.pop(req, None)

    def pending_ident(self, block: int, slot: int) -> set[int]:
        return {w[(block, slot)] for w in self.pending.values() if (block, slot) in w}

    def commit(self) -> None:
        for writes in self.pending.values():
            for (block, slot), ident in writes.items():
                self.slots.setdefault(block, {})[slot] = Slot(ident, True)
        self.pending.clear()

    def read(self, block: int, slot: int, want: int, *, pending_ok: bool) -> Invariant | None:
        """None when ``(block, slot)`` holds computed KV ``want`` (or, with ``pending_ok``,
        KV the open step computes); else the family the mismatch breaks."""
        pending = self.pending_ident(block, slot) if pending_ok else set()
        if want in pending:
            return None
        if pending:  # the open step writes other content there
            return Family.CONTENT
        s = self.slots.get(block, {}).get(slot)
        if s is None or not s.computed:
            return Family.COMPUTED
        return None if s.ident == want else Family.CONTENT


@dataclass(frozen=True)
class Geometry:
    block_sizes: tuple[int, ...]
    windows: tuple[int | None, ...]

    @property
    def alignment(self) -> int:
        return math.lcm(*self.block_sizes)

    def needed(self, group: int, upto: int, start: int = 0) -> range:
        """Positions a computation of tokens [start, upto) reads in ``group``."""
        window = self.windows[group]
        lo = 0 if window is None else max(0, start - (window - 1))
        return range(lo, upto)


def check_reads(shadow: KVShadow, ids: Identities, r: ReqState, tables: Sequence[Sequence[int]],
                geo: Geometry, positions_of: Sequence[Sequence[int]], *, pending_ok: bool,
                what: str) -> None:
    """Every needed position of every group reads ``r``'s own KV."""
    for g, positions in enumerate(positions_of):
        bs = geo.block_sizes[g]
        table = tables[g]
        for p in positions:
            i = p // bs
            block = table[i] if i < len(table) else None
            if block is None or block == NULL:
                raise Violation(Family.TABLE, f"{what}: group {g} has no block for position "
                                f"{p} it reads", expected="a real block", observed=block)
            family = shadow.read(block, p % bs, ids.of(r, p), pending_ok=pending_ok)
            if family is not None:
                s = shadow.slots.get(block, {}).get(p % bs)
                raise Violation(family, f"{what}: group {g} position {p} (block {block} slot "
                                f"{p % bs}) does not hold this request's computed KV",
                                expected=ids.of(r, p), observed=s)


def check_hit(shadow: KVShadow, ids: Identities, r: ReqState, hit: int,
              hit_tables: Sequence[Sequence[int]], geo: Geometry) -> None:
    """A prefix hit of ``hit`` tokens with blocks ``hit_tables`` (per group)."""
    if hit < 0 or hit % geo.alignment:
        raise Violation(Family.COMPUTED, "a hit must be aligned to every group's block size",
                        expected=f"a multiple of {geo.alignment}", observed=hit)
    if hit > len(r.tokens) - 1:
        raise Violation(Family.COMPUTED, "a hit must leave at least the last token to compute",
                        expected=f"<= {len(r.tokens) - 1}", observed=hit)
    for g, table in enumerate(hit_tables):
        if len(table) != hit // geo.block_sizes[g]:
            raise Violation(Family.TABLE, f"hit blocks of group {g}: one per hit block",
                            expected=hit // geo.block_sizes[g], observed=list(table))
    check_reads(shadow, ids, r, hit_tables, geo,
                [geo.needed(g, hit, hit) for g in range(len(hit_tables))], pending_ok=True,
                what=f"hit of {hit} tokens")
