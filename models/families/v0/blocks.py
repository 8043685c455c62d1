"""Block and table objects as the program sees them: one record per block handle (program
handles are >= 0; blocks inside tables get negative keys), with its device, model id, chain
link, tokens and the exact identity of every slot it has written.

A block is *hashed* (has content) once it is full and its predecessor is hashed (or it is the
first); its content key never changes afterwards, so a record keeps it even after the
predecessor is freed. The chain walk is iterative: chains of any length are fine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.families.v0.content import ROOT
from models.families.v0.ops.values import Dev, Extra


@dataclass(slots=True)
class BlockRec:
    key: int
    device: Dev
    prev: int | None
    extra: Extra
    start: int = ROOT  # identity of the prefix before this block (the predecessor's end)
    tokens: list[int] = field(default_factory=list)
    idents: list[int] = field(default_factory=list)  # identity of each written slot
    id: int | None = None  # the model's physical id; None once freed
    content: int | None = None  # content key, once hashed
    live: bool = True
    freed_at: int = -1  # BlockStore.made when freed: a later object may reuse this one

    def clone(self) -> BlockRec:
        return BlockRec(self.key, self.device, self.prev, self.extra, self.start,
                        list(self.tokens), list(self.idents), self.id, self.content, self.live,
                        self.freed_at)

    @property
    def end(self) -> int:
        return self.idents[-1] if self.idents else self.start


class BlockStore:
    """Every block record ever made, plus the count of live successors of each block.

    ``made`` counts the block objects the target has had to make. A target may recycle a
    freed block's object for a later one (upstream pools them), so a freed handle is
    *reusable* once ``made`` moved past its ``freed_at``: what it then names is unknown.
    """

    __slots__ = ("children", "made", "next_internal", "recs")

    def __init__(self) -> None:
        self.recs: dict[int, BlockRec] = {}
        self.children: dict[int, int] = {}  # key -> live blocks whose prev is key
        self.next_internal = -1
        self.made = 0

    def clone(self) -> BlockStore:
        other = BlockStore()
        other.recs = {k: r.clone() if r.live else r for k, r in self.recs.items()}
        other.children = dict(self.children)
        other.next_internal = self.next_internal
        other.made = self.made
        return other

    def reusable(self, rec: BlockRec) -> bool:
        """``rec`` was freed and a block object has been made since (see the class doc)."""
        return not rec.live and rec.freed_at != self.made

    def __contains__(self, key: object) -> bool:
        return key in self.recs

    def __getitem__(self, key: int) -> BlockRec:
        return self.recs[key]

    def internal_key(self) -> int:
        key = self.next_internal
        self.next_internal -= 1
        return key

    def add(self, rec: BlockRec) -> BlockRec:
        self.made += 1
        self.recs[rec.key] = rec
        if rec.prev is not None:
            self.children[rec.prev] = self.children.get(rec.prev, 0) + 1
        return rec

    def kill(self, rec: BlockRec) -> None:
        rec.live = False
        rec.id = None
        rec.freed_at = self.made
        if rec.prev is not None:
            self.children[rec.prev] -= 1

    def forget(self, key: int) -> None:
        """Drop a dead record nothing refers to any more (a freed table's blocks)."""
        self.recs.pop(key, None)
        self.children.pop(key, None)

    def is_last(self, key: int) -> bool:
        """No live block continues this one."""
        return not self.children.get(key, 0)

    def chain(self, key: int) -> list[int]:
        """Keys from the first block of the chain to ``key``."""
        out: list[int] = []
        cur: int | None = key
        while cur is not None:
            out.append(cur)
            cur = self.recs[cur].prev
        out.reverse()
        return out


@dataclass(slots=True)
class TableRec:
    """A ``BlockTable``: its chain of block keys, all its tokens, extra key and device."""

    key: int
    device: Dev
    extra: Extra
    blocks: list[int] = field(default_factory=list)
    tokens: tuple[int, ...] = ()
    live: bool = True
    window: int | None = None  # sliding window in blocks (see ``models.families.v0.window``)

    def clone(self) -> TableRec:
        return TableRec(self.key, self.device, self.extra, list(self.blocks), self.tokens,
                        self.live, self.window)
