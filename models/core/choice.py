"""Refinement: where the contract leaves the target a choice the model cannot see, the model
explores every permitted choice.

A step runs under a :class:`Chooser`. ``choose(options)`` returns ``options[0]`` (the choice
consistent with what the target showed, when one is) unless the step is being *explored*:
then every branch point is recorded and :meth:`alternatives` lists the untried paths, which
the oracle replays on copies of the model taken before the step. Options beyond ``limit`` per
point are dropped and the chooser says so (``pruned``), so the oracle never turns a pruned
search into a false alarm.
"""

from __future__ import annotations

from collections.abc import Sequence


class Chooser:
    __slots__ = ("explore", "limit", "path", "pruned", "taken", "widths")

    def __init__(self, path: tuple[int, ...] = (), *, explore: bool = False,
                 limit: int = 8) -> None:
        self.path = path
        self.explore = explore
        self.limit = limit
        self.taken: list[int] = []
        self.widths: list[int] = []
        self.pruned = False

    def choose(self, options: Sequence[int]) -> int:
        if len(options) == 1 or not self.explore:
            if len(options) > 1:
                self.pruned = True
            return options[0]
        width = min(len(options), self.limit)
        if width < len(options):
            self.pruned = True
        k = len(self.taken)
        index = self.path[k] if k < len(self.path) else 0
        self.taken.append(index)
        self.widths.append(width)
        return options[index]

    def alternatives(self) -> list[tuple[int, ...]]:
        """Paths that differ from this run at a branch point first reached in this run."""
        out: list[tuple[int, ...]] = []
        for k in range(len(self.path), len(self.taken)):
            out.extend((*self.taken[:k], j) for j in range(1, self.widths[k]))
        return out
