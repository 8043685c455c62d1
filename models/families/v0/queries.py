"""Read-only questions generators ask the oracle, so programs stay in contract and reach the
interesting states (hits, full pools, shared blocks) without guessing. Answers come from the
model (when hidden choices left several model states open, from the first; free counts and
block layout agree in all of them)."""

from __future__ import annotations

from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.content import ROOT, ContentTrie
from models.families.v0.contract import OutOfContract, misuse_or_out, shortfall
from models.families.v0.evictor_model import EvictorModel  # evictor level
from models.families.v0.operations import Dev, Op, Tokens
from models.families.v0.refcount_model import RefcountModel  # refcount level


class Queries:
    worlds: list[Model]
    trie: ContentTrie
    evictor: EvictorModel  # evictor level: the standalone evictor's candidates
    refcount: RefcountModel  # refcount level: the standalone counter and CoW tracker

    @property
    def model(self) -> Model:
        return self.worlds[0]

    def live_blocks(self) -> list[int]:
        return sorted(self.model.handles)

    def live_tables(self) -> list[int]:
        return sorted(self.model.live_tables)

    def device_of(self, handle: int) -> Dev:
        return self.model.blocks[handle].device

    def table_device(self, table: int) -> Dev:
        return self.model.tables[table].device

    def tokens_of(self, handle: int) -> Tokens:
        return tuple(self.model.blocks[handle].tokens)

    def extra_of(self, handle: int) -> ops.Extra:
        return self.model.blocks[handle].extra

    def is_full(self, handle: int) -> bool:
        return self.model.is_full(self.model.blocks[handle])

    def is_hashed(self, handle: int) -> bool:
        return self.model.blocks[handle].content is not None

    def last_in_chain(self, handle: int) -> bool:
        return self.model.blocks.is_last(handle)

    def chain_of(self, handle: int) -> list[int]:
        """The chain ending at ``handle``, from its first block, cut after any freed block or
        device change (so the result can be forked or swapped as a whole)."""
        m = self.model
        chain = m.blocks.chain(handle)
        dev = m.blocks[handle].device
        start = len(chain)
        while start and m.blocks[chain[start - 1]].live and m.blocks[chain[start - 1]].device \
                is dev:
            start -= 1
        return chain[start:]

    def appendable(self, handle: int) -> bool:
        """A non-empty append to ``handle`` (that fits) is in contract and not misuse."""
        m = self.model
        rec = m.blocks[handle]
        return rec.live and not m.is_full(rec) and self._valid(ops.Append(handle, (0,)))

    def table_len(self, table: int) -> int:
        return len(self.model.tables[table].tokens)

    def table_tokens(self, table: int) -> Tokens:
        return self.model.tables[table].tokens

    def free_count(self, dev: Dev) -> int:
        return self.model.pools[dev].free

    def cached_contents(self, dev: Dev) -> list[tuple[Tokens, ops.Extra]]:
        """Every content cached on ``dev`` as (whole token prefix, extra of its last block)."""
        m = self.model
        out = []
        for content in m.pools[dev].id_of:
            depth = self.trie.depth(content)
            _, tokens, extra = self.trie.back(content, depth)
            out.append((tokens, extra))
        return sorted(out, key=repr)

    def hit_candidates(self, prev: int | None, dev: Dev, extra: ops.Extra) -> list[Tokens]:
        """Block contents that would hit the cache on ``dev`` right after ``prev``."""
        m = self.model
        start = ROOT if prev is None else m.blocks[prev].end
        out = []
        for content in m.pools[dev].id_of:
            anc, tokens, ex = self.trie.back(content, m.bs)
            if anc == start and ex == extra:
                out.append(tokens)
        return sorted(out)

    def contract_error(self, op: Op) -> str | None:
        """Why ``op`` is out of contract now, or None."""
        try:
            self._misuse(op)
        except OutOfContract as why:
            return str(why)
        return None

    def is_misuse(self, op: Op) -> bool:
        try:
            return self._misuse(op) is not None
        except OutOfContract:
            return False

    def _valid(self, op: Op) -> bool:
        try:
            return self._misuse(op) is None
        except OutOfContract:
            return False

    # evictor level: evictor operations are judged by the evictor model alone (as in
    # ``Oracle.step``); they never touch the allocator, so they never lack free blocks.
    def _misuse(self, op: Op) -> str | None:
        if isinstance(op, ops.EVICTOR_OPS):
            return self.evictor.misuse(op)
        if isinstance(op, ops.REFCOUNT_OPS):  # refcount level: likewise
            return self.refcount.misuse(op)
        return misuse_or_out(self.model, op)
    # end evictor level

    def would_fail_no_free(self, op: Op) -> bool:
        """Exact: a valid ``op`` needs more free ids than the device has (in any model state
        still consistent with the target)."""
        standalone = (*ops.EVICTOR_OPS, *ops.REFCOUNT_OPS)  # evictor / refcount level
        if not self._valid(op) or isinstance(op, standalone):
            return False
        return any(shortfall(w, op) for w in self.worlds)



