"""Semantics of the evictor-level operations (``EVICTOR_OPS``; docs/API.md §6).

The model is the candidate set: id -> (content_hash, num_hashed_tokens, last_accessed), ranked
by :class:`~models.families.v0.lru.LruIndex`. ``evict`` must return a permitted victim (the whole
minimal bucket: smallest time, ties to the most hashed tokens, remaining ties open; any candidate if
the target does not claim ``lru``) with the hash it was added with, and drop it. After every step
the evictor's ``num_blocks`` and ``free_table`` must equal the model.

Misuse: ``update`` or ``remove`` of a non-candidate, ``evict`` when empty, ``add`` with a bool or
negative id or a negative token count (malformed, as ``models.families.v0.ops.malformed`` for the
allocator, whose block ids are ints and never bools). A target claiming typed errors must refuse it
(``evict``: ``NoFreeBlocksError`` or a typed error) and, if it claims atomicity, change nothing
(ATOMIC); for other targets it is out of contract. ``add`` of a candidate (docs/API.md is silent) is
allowed two ways for typed-error targets: a typed error that changes nothing, or an overwrite (the
id's metadata becomes the new one, as if removed and added again); targets without typed errors are
never asked.

Families: LRU (wrong victim; rank inputs ``last_accessed``/``num_hashed_tokens`` shown wrong),
LEAK (membership, ``num_blocks``, ``__contains__``), CACHE (a content hash shown or returned
wrong), ATOMIC (a refused call changed the evictor), CRASH (an untyped error).
"""

from __future__ import annotations

from models.core.invariants import Invariant
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Capabilities
from models.families.v0.component_model import ComponentModel
from models.families.v0.invariants import Family
from models.families.v0.lru import LruIndex
from models.families.v0.operations import ErrorKind, EvictorState, Op

F = Family
Meta = tuple[int, int, float]  # content_hash, num_hashed_tokens, last_accessed

_MISUSE_FAMILY = F.LEAK  # a misuse accepted: the target thinks a non-candidate is one


class EvictorModel(ComponentModel[EvictorState]):
    """The candidates of the target's standalone evictor (see the module docstring)."""

    COMPONENT = "the evictor"

    def __init__(self, caps: Capabilities) -> None:
        super().__init__(caps)
        self.meta: dict[int, Meta] = {}
        self.lru = LruIndex()

    def misuse(self, op: Op) -> str | None:
        """Why ``op`` is misuse in the current state (None: valid); raises
        :class:`OutOfContract` for what the contract does not cover."""
        if isinstance(op, ops.EvictorAdd):
            if type(op.block_id) is not int or op.block_id < 0 or op.num_hashed_tokens < 0:
                return "add with a bool or negative block id or token count (malformed)"
            return f"add of candidate {op.block_id}" if op.block_id in self.meta else None
        if isinstance(op, ops.EvictorUpdate | ops.EvictorRemove):
            absent = op.block_id not in self.meta
            return f"{op.kind} of non-candidate {op.block_id}" if absent else None
        if isinstance(op, ops.EvictorEvict):
            return "evict of an empty evictor" if not self.meta else None
        return None

    def family(self, op: Op) -> Invariant:
        return _MISUSE_FAMILY

    def refusal(self, op: Op, error: ErrorKind) -> bool:
        """A typed misuse error; for ``evict`` of an empty evictor ``NoFreeBlocksError`` too."""
        return error is ErrorKind.MISUSE or (error is ErrorKind.NO_FREE_BLOCKS
                                             and isinstance(op, ops.EvictorEvict))

    def tolerated(self, op: Op) -> bool:
        """``add`` of a candidate may overwrite it (docs/API.md is silent)."""
        return isinstance(op, ops.EvictorAdd) and type(op.block_id) is int \
            and op.block_id in self.meta and op.num_hashed_tokens >= 0

    def _add(self, block_id: int, meta: Meta) -> None:
        self.meta[block_id] = meta
        self.lru.add(block_id, meta[2], meta[1])

    def _apply(self, op: Op, value: object) -> None:
        if isinstance(op, ops.EvictorAdd):  # a new candidate, or an overwrite (see above)
            self._add(op.block_id, (op.content_hash, op.num_hashed_tokens, op.last_accessed))
        elif isinstance(op, ops.EvictorUpdate):
            content_hash, tokens, _ = self.meta[op.block_id]
            self._add(op.block_id, (content_hash, tokens, op.last_accessed))
        elif isinstance(op, ops.EvictorRemove):
            del self.meta[op.block_id]
            self.lru.remove(op.block_id)
        elif isinstance(op, ops.EvictorEvict):
            self._evicted(value)
        elif isinstance(op, ops.EvictorContains):
            want = [i in self.meta for i in op.ids]
            if value != want:
                self._flag(F.LEAK, f"__contains__ of {list(op.ids)}", expected=want,
                           observed=value)

    def _evicted(self, value: object) -> None:
        block_id, content_hash = value if isinstance(value, list) else (None, None)
        if block_id not in self.meta:
            self._flag(F.LEAK, "evict returned a non-candidate", expected=sorted(self.meta),
                       observed=block_id)
            return
        permitted = self.lru.minimal() if self.caps.lru else frozenset(self.meta)
        if block_id not in permitted:
            self._flag(F.LRU, f"victim {block_id} ranks {self.lru.rank(block_id)}; permitted "
                       f"victims rank {self.lru.rank(min(permitted))}",
                       expected=sorted(permitted), observed=block_id)
        if content_hash != self.meta[block_id][0]:
            self._flag(F.CACHE, f"evict returned block {block_id} with another content hash",
                       expected=self.meta[block_id][0], observed=content_hash)
        del self.meta[block_id]  # follow the target's victim
        self.lru.remove(block_id)

    def _compare(self, after: EvictorState) -> None:
        if after.num_blocks != len(self.meta):
            self._flag(F.LEAK, "num_blocks", expected=len(self.meta), observed=after.num_blocks)
        table = after.table
        if table.keys() != self.meta.keys():
            self._flag(F.LEAK, "free_table ids", expected=sorted(self.meta),
                       observed=sorted(table))
        for block_id in sorted(table.keys() & self.meta.keys()):
            (want_hash, want_tokens, want_time) = self.meta[block_id]
            got_hash, got_tokens, got_time = table[block_id]
            if got_hash != want_hash:
                self._flag(F.CACHE, f"free_table[{block_id}].content_hash", expected=want_hash,
                           observed=got_hash)
            if (got_tokens, got_time) != (want_tokens, want_time):
                self._flag(F.LRU, f"free_table[{block_id}] (num_hashed_tokens, last_accessed)",
                           expected=(want_tokens, want_time), observed=(got_tokens, got_time))
