"""The cache policies as the contract states them, over key indices (what the ``ORDER``
invariant compares a tier's evictions with).

``LRU``: every resident key has a rank, a pair compared lexicographically (ties: the smaller
key's bytes), drawn from one counter. A key stored without a position, or committed when a
request finishes, gets ``(next, 0)``; a key a request stores or first uses with end-token
position ``pos`` gets the request's provisional rank ``(R, -pos)`` (``R`` drawn the first time
the request records a key), never lowering a rank; finishing a request commits its keys tail
to head, so its head ends most recent. The victims are the least ranked evictable keys.

``ARC``: T1 holds keys used by one request, T2 keys a later request reused; B1/B2 remember
keys evicted from T1/T2 (each at most ``capacity``). A store miss on a B1 ghost grows the T1
target ``p`` by ``max(1, |B2|/|B1|)``, on a B2 ghost shrinks it by ``max(1, |B1|/|B2|)``, within
``[0, capacity]``. Each victim comes from T1 (least recent evictable) while T1, less the T1
victims so far, is at least ``int(p)``, else from T2, falling back to the other list when the
preferred one has no candidate. Finishing a request moves each key it only inserted to its
list's recent end and each key it reused to T2's recent end, tail first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence

from models.families.offload.ops import key_bytes

Positions = Callable[[int], int | None]  # a request's key -> end-token position


class Policy:
    """What the tier model asks of a policy (keys are resident when the model says so)."""

    name = ""

    def insert(self, key: int, req: int, pos: int | None) -> None:
        raise NotImplementedError

    def remove(self, key: int) -> None:
        raise NotImplementedError

    def access(self, keys: Sequence[int], req: int, positions: Positions,
               resident: Callable[[int], bool]) -> None:
        """A request records ``keys`` for the first time."""

    def store_miss(self, keys: Sequence[int]) -> None:
        """Keys about to be stored, first offered by this request (before insertion)."""

    def finish(self, ordered: Sequence[int], insertion_only: set[int], reused: set[int],
               resident: Callable[[int], bool]) -> None:
        raise NotImplementedError

    def evict(self, n: int, protected: set[int], evictable: set[int]) -> list[int] | None:
        """``n`` victims among ``evictable`` not in ``protected`` (removed), or None (nothing
        changes) when there are fewer."""
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        """The policy's state, for a violation's message."""
        return ""


class LRU(Policy):
    """See the module docstring."""

    name = "lru"

    def __init__(self) -> None:
        self.rank: dict[int, tuple[int, int]] = {}
        self.request_rank: dict[int, int] = {}
        self.next = 0

    def _request(self, req: int) -> int:
        if req not in self.request_rank:
            self.next += 1
            self.request_rank[req] = self.next
        return self.request_rank[req]

    def insert(self, key: int, req: int, pos: int | None) -> None:
        if pos is None:
            self.next += 1
            self.rank[key] = (self.next, 0)
        else:
            self.rank[key] = (self._request(req), -pos)

    def remove(self, key: int) -> None:
        del self.rank[key]

    def access(self, keys: Sequence[int], req: int, positions: Positions,
               resident: Callable[[int], bool]) -> None:
        r = self._request(req)
        for key in keys:
            pos = positions(key)
            if pos is None or not resident(key):
                continue
            self.rank[key] = max(self.rank[key], (r, -pos))

    def finish(self, ordered: Sequence[int], insertion_only: set[int], reused: set[int],
               resident: Callable[[int], bool]) -> None:
        for key in reversed(ordered):
            if resident(key):
                self.next += 1
                self.rank[key] = (self.next, 0)

    def evict(self, n: int, protected: set[int], evictable: set[int]) -> list[int] | None:
        if n <= 0:
            return []
        order = sorted((k for k in evictable if k not in protected),
                       key=lambda k: (self.rank[k], key_bytes(k)))
        if len(order) < n:
            return None
        for key in order[:n]:
            del self.rank[key]
        return order[:n]

    def clear(self) -> None:
        self.rank.clear()
        self.request_rank.clear()
        self.next = 0

    def describe(self) -> str:
        return "ranks " + ", ".join(f"{k}:{r}" for k, r in sorted(self.rank.items(),
                                                               key=lambda kv: kv[1]))


class ARC(Policy):
    """See the module docstring."""

    name = "arc"

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.p = 0.0
        self.t1: OrderedDict[int, None] = OrderedDict()
        self.t2: OrderedDict[int, None] = OrderedDict()
        self.b1: OrderedDict[int, None] = OrderedDict()
        self.b2: OrderedDict[int, None] = OrderedDict()

    def insert(self, key: int, req: int, pos: int | None) -> None:
        self.t1[key] = None
        self.b1.pop(key, None)
        self.b2.pop(key, None)

    def remove(self, key: int) -> None:
        if key in self.t1:
            del self.t1[key]
        else:
            del self.t2[key]

    def store_miss(self, keys: Sequence[int]) -> None:
        for key in reversed(keys):
            if key in self.b1:
                self.p = min(self.p + max(1, len(self.b2) / len(self.b1)), self.capacity)
                self.b1.move_to_end(key)
            elif key in self.b2:
                self.p = max(self.p - max(1, len(self.b1) / len(self.b2)), 0)
                self.b2.move_to_end(key)

    def finish(self, ordered: Sequence[int], insertion_only: set[int], reused: set[int],
               resident: Callable[[int], bool]) -> None:
        for key in reversed(ordered):
            if key in insertion_only:
                if key in self.t1:
                    self.t1.move_to_end(key)
                elif key in self.t2:
                    self.t2.move_to_end(key)
            elif key in reused:
                if key in self.t1:
                    del self.t1[key]
                    self.t2[key] = None
                elif key in self.t2:
                    self.t2.move_to_end(key)

    def evict(self, n: int, protected: set[int], evictable: set[int]) -> list[int] | None:
        if n <= 0:
            return []

        def candidates(lst: OrderedDict[int, None]) -> Iterator[int]:
            return (k for k in list(lst) if k in evictable and k not in protected)

        t1, t2 = candidates(self.t1), candidates(self.t2)
        virtual_t1 = len(self.t1)
        picks: list[tuple[int, bool]] = []
        for _ in range(n):
            pick: tuple[int, bool] | None = None
            if virtual_t1 >= int(self.p):
                key = next(t1, None)
                if key is not None:
                    pick, virtual_t1 = (key, True), virtual_t1 - 1
            if pick is None:
                key = next(t2, None)
                if key is not None:
                    pick = (key, False)
            if pick is None:
                key = next(t1, None)
                if key is None:
                    return None
                pick, virtual_t1 = (key, True), virtual_t1 - 1
            picks.append(pick)
        for key, from_t1 in picks:
            if from_t1:
                del self.t1[key]
                self.b1[key] = None
            else:
                del self.t2[key]
                self.b2[key] = None
        for ghost in (self.b1, self.b2):
            while len(ghost) > self.capacity:
                ghost.popitem(last=False)
        return [key for key, _ in picks]

    def clear(self) -> None:
        self.t1.clear()
        self.t2.clear()
        self.b1.clear()
        self.b2.clear()
        self.p = 0.0

    def describe(self) -> str:
        return (f"T1 {list(self.t1)} T2 {list(self.t2)} B1 {list(self.b1)} B2 {list(self.b2)} "
                f"p {self.p:g}")


def policy(name: str, capacity: int) -> Policy:
    """The policy called ``name`` (``lru`` or ``arc``)."""
    if name == "lru":
        return LRU()
    if name == "arc":
        return ARC(capacity)
    raise ValueError(f"no cache policy {name!r} (lru, arc)")
