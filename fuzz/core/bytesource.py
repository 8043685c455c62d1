"""A byte-consuming chooser: every decision of the decoder reads the next byte(s).

Contract: no call ever fails. Once the bytes run out every choice returns its *default*
(the first option, the low end of a range, ``False``), so any byte string, including the
empty one, decodes. Each decision reads a fixed number of bytes that depends only on the size
of the choice, never on the value read, so flipping one byte changes that one decision and
leaves the parse of every later byte aligned; and a choice is ``byte % n``, so a byte that
moves by one moves the choice to its neighbour.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class ByteSource:
    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    @property
    def exhausted(self) -> bool:
        return self._pos >= len(self._data)

    @property
    def consumed(self) -> int:
        return min(self._pos, len(self._data))

    def byte(self) -> int:
        """The next byte, or 0 past the end."""
        pos = self._pos
        self._pos += 1
        return self._data[pos] if pos < len(self._data) else 0

    def below(self, n: int) -> int:
        """An int in ``[0, n)``: one byte for ``n <= 256``, two for larger ``n``."""
        if n <= 1:
            return 0
        if n <= 256:
            return self.byte() % n
        return ((self.byte() << 8) | self.byte()) % n

    def int_in(self, lo: int, hi: int) -> int:
        """An int in ``[lo, hi]`` (``lo`` by default)."""
        return lo + self.below(hi - lo + 1) if hi > lo else lo

    def pick(self, options: Sequence[T]) -> T:
        """One of ``options`` (non-empty); the first by default."""
        return options[self.below(len(options))]

    def flag(self, percent_true: int = 50) -> bool:
        """``True`` with roughly ``percent_true`` percent of byte values; ``False`` by default."""
        return self.byte() * 100 < percent_true * 256 and not self.exhausted_before_last()

    def exhausted_before_last(self) -> bool:
        """Whether the byte just read was past the end (so the choice took its default)."""
        return self._pos > len(self._data)

    def subset(self, options: Sequence[T], max_size: int, *, min_size: int = 0) -> tuple[T, ...]:
        """Up to ``max_size`` distinct options in the order drawn (at least ``min_size`` if
        there are that many)."""
        size = self.int_in(min(min_size, len(options)), min(max_size, len(options)))
        pool = list(options)
        out: list[T] = []
        for _ in range(size):
            out.append(pool.pop(self.below(len(pool))))
        return tuple(out)
