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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from models.families import Family, Violation

F = Family


class ShadowMemory:
    __slots__ = ("block_size", "holders", "slots", "where")

    def __init__(self, block_size: int, num_ids: int) -> None:
        self.block_size = block_size
        self.slots: list[list[int]] = [[0] * block_size for _ in range(num_ids)]
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
            if src is None or dst is None or not (self._valid(src) and self._valid(dst)) \
                    or self.slots[src] == self.slots[dst]:
                continue
            self.slots[dst] = list(self.slots[src])
            changed.add(dst)
            others = self.holders.get(dst, set()) - arrived
            if others:
                fam = F.SWAP if swapped else F.COW
                found.append(Violation(fam, f"copy {src} -> {dst} overwrote an id still held "
                                       f"by blocks {sorted(others)}"))
        for key, first in writes.items():
            block_id = self.where.get(key)
            if block_id is None:
                continue
            want = expect(key)
            row = self.slots[block_id]
            if row[first:len(want)] == want[first:]:
                continue
            row[first:len(want)] = want[first:]
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
