"""The data plane: a simulated paged KV cache driven only by what the *target* reported.

Every physical id has ``block_size`` slots; a slot holds the identity of the KV it stores (the
exact prefix through that token, see ``content``), 0 when never written. Per operation, as an
engine would: first the reported copy-on-write pairs and swap mappings copy slots from source
to destination ids, then every block that gained tokens writes them into the id the target
now shows for it. Holders are the live block keys and the id the target shows for each.

A swap copies per block, from the id it showed before to the id it shows now: the returned
``{src: dst}`` mapping cannot name two destinations for one source (forked partial blocks
swapped in one call get one fresh id each), so an engine that copies by the mapping alone
would lose one of them; the model checks the mapping itself separately.

- A write or copy that changes an id another live holder also holds breaks COW when the writer
  already shared that id before the step (a missing copy-on-write), SWAP for a swap copy, and
  CONTENT otherwise (e.g. a cache hit that handed out a block holding other content).
- Afterwards every block whose id or slots changed must read back exactly its own content:
  CONTENT, or SWAP for a block just swapped.

When KV is written: a slot's identity is where the engine *will* compute that KV; it holds
valid KV only once the batch that computes it ran. ``valid[id]`` counts the leading slots of
an id whose KV is valid. ``compute()`` is that batch (the v0 flow: the scheduled batch runs,
then ``mark_blocks_as_computed``): every id a live block shows gets valid KV for that
block's tokens. A write of other identities invalidates from its first slot (the id was
reused); a copy carries the source's validity (an equal copy keeps the better of the two).
``check_claims`` judges every answer that lets the engine skip work: each id it names must
hold valid KV of exactly the content asked for (COMPUTED). A block that moves to another id
without a copy (promotion onto a duplicate) must find its earlier tokens' computed KV there,
or another live holder that computes it (CONTENT).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from models.core.invariants import Violation
from models.families.v0.invariants import Family

F = Family


class ShadowMemory:
    __slots__ = ("block_size", "holders", "slots", "valid", "where")

    def __init__(self, block_size: int, num_ids: int) -> None:
        self.block_size = block_size
        self.slots: list[list[int]] = [[0] * block_size for _ in range(num_ids)]
        self.valid: list[int] = [0] * num_ids  # leading slots holding computed KV
        self.where: dict[int, int] = {}  # live block key -> id the target shows
        self.holders: dict[int, set[int]] = {}  # id -> live block keys showing it

    def _valid(self, block_id: object) -> bool:
        return isinstance(block_id, int) and 0 <= block_id < len(self.slots)

    def step(self, *, moved: Mapping[int, int | None], writes: Mapping[int, int],
             copies: Iterable[tuple[int | None, int | None]], swapped: bool,
             expect: Callable[[int], list[int]]) -> list[Violation]:
        """Apply one operation. ``moved``: key -> id now shown (None: ended); ``writes``: key ->
        first slot written; ``copies``: copy-on-write (src, dst) pairs; ``swapped``: the moved
        blocks were swapped (copied from their previous ids); ``expect``: key -> the identities
        it must read."""
        found: list[Violation] = []
        before = {k: self.where.get(k) for k in moved}
        for key, block_id in moved.items():
            old = self.where.pop(key, None)
            if old is not None:
                self.holders[old].discard(key)
            if self._valid(block_id) and block_id is not None:
                self.where[key] = block_id
                self.holders.setdefault(block_id, set()).add(key)
        arrived = {k for k, i in moved.items() if i is not None and before[k] != i}
        if swapped:
            copies = [*copies, *((before[k], moved[k]) for k in sorted(arrived)
                                 if before[k] is not None)]
        changed: set[int] = set()
        for src, dst in copies:
            if src is None or dst is None or not (self._valid(src) and self._valid(dst)):
                continue
            if self.slots[src] == self.slots[dst]:
                self.valid[dst] = max(self.valid[dst], self.valid[src])
                continue
            self.slots[dst] = list(self.slots[src])
            self.valid[dst] = self.valid[src]
            changed.add(dst)
            others = self.holders.get(dst, set()) - arrived
            if others:
                fam = F.SWAP if swapped else F.COW
                found.append(Violation(fam, f"copy {src} -> {dst} overwrote an id still held "
                                       f"by blocks {sorted(others)}"))
        if not swapped:
            found += self._moved_without_kv(moved, before, writes)
        for key, first in writes.items():
            block_id = self.where.get(key)
            if block_id is None:
                continue
            want = expect(key)
            row = self.slots[block_id]
            if row[first:len(want)] == want[first:]:
                continue
            row[first:len(want)] = want[first:]
            self.valid[block_id] = min(self.valid[block_id], first)
            changed.add(block_id)
            others = self.holders[block_id] - {key}
            if others:
                shared_before = before.get(key) == block_id
                fam = F.COW if shared_before else F.CONTENT
                what = "write to a shared id without copy-on-write" if shared_before else \
                    "write into an id that holds other live content"
                found.append(Violation(fam, f"block {key}: {what} (id {block_id}, also held by "
                                       f"{sorted(others)})"))
        readers = {k for k in moved if k in self.where}
        for block_id in changed:
            readers |= self.holders.get(block_id, set())
        for key in sorted(readers):
            want = expect(key)
            got = self.slots[self.where[key]][:len(want)]
            if got != want:
                fam = F.SWAP if swapped and key in moved else F.CONTENT
                found.append(Violation(fam, f"block {key} (id {self.where[key]}) reads KV "
                                       "that is not its own content", expected=want,
                                       observed=got))
        return found

    def _moved_without_kv(self, moved: Mapping[int, int | None],
                          before: Mapping[int, int | None],
                          writes: Mapping[int, int]) -> list[Violation]:
        """A block that moved to another id without a copy (a promotion onto a cached
        duplicate) must find there the computed KV it had of its earlier tokens, unless
        another live block holds that id (the batch computes it there): CONTENT."""
        found: list[Violation] = []
        for key, new in moved.items():
            old, first = before[key], writes.get(key)
            if old is None or new is None or old == new or not first \
                    or not (self._valid(old) and self._valid(new)):
                continue
            kept = min(self.valid[old], first)
            if kept > self.valid[new] and not self.holders.get(new, set()) - {key}:
                found.append(Violation(F.CONTENT, f"block {key} moved from id {old} to id {new} "
                                       f"without a copy: the KV of its first {kept} token(s) "
                                       f"was computed in id {old}, never in id {new}",
                                       expected=f"{kept} computed slots",
                                       observed=self.valid[new]))
        return found

    def compute(self, expect: Callable[[int], list[int]]) -> None:
        """The batch ran: every id a live block shows holds valid KV for its tokens."""
        for block_id, keys in self.holders.items():
            for key in keys:
                n = len(expect(key))
                if self.slots[block_id][:n] == expect(key) and n > self.valid[block_id]:
                    self.valid[block_id] = n

    def check_claims(self, what: str, claims: Iterable[tuple[int, object, list[int]]]
                     ) -> list[Violation]:
        """``claims``: (position, id, identities) the answer says hold computed KV."""
        for pos, block_id, want in claims:
            if not self._valid(block_id) or not isinstance(block_id, int):
                continue  # not an id: the model's exact check reports the value
            n = len(want)
            if self.slots[block_id][:n] != want:
                return [Violation(F.COMPUTED, f"{what}: block {pos} of the answer (id "
                                  f"{block_id}) holds KV of other content", expected=want,
                                  observed=self.slots[block_id][:n])]
            if self.valid[block_id] < n:
                return [Violation(F.COMPUTED, f"{what}: block {pos} of the answer (id "
                                  f"{block_id}) is reported computed, but its KV was never "
                                  "written (no batch computed it since the id got this "
                                  "content)", expected=f"{n} computed slots",
                                  observed=self.valid[block_id])]
        return []
