"""The hashes a target has shown, per exact content (HASH across the whole run)."""

from __future__ import annotations

from models.families.v0.context import Context
from models.families.v0.invariants import Family

F = Family


class HashLedger:
    """Every (content, hash) pair the target has shown for a live handle in this run. A
    deterministic content hash gives equal content equal hashes and, unless it is broken,
    different content different hashes, whether or not the first holder is still live."""

    __slots__ = ("by_content", "by_hash")

    def __init__(self) -> None:
        self.by_hash: dict[int, int] = {}
        self.by_content: dict[int, int] = {}

    def check(self, c: Context, where: str, content: int, hv: int) -> None:
        other = self.by_hash.setdefault(hv, content)
        if other != content:
            c.flag(F.HASH, f"{where}: different content shares hash {hv}", observed=hv)
        if self.by_content.setdefault(content, hv) != hv:
            c.flag(F.HASH, f"{where}: equal content, different hashes",
                   expected=self.by_content[content], observed=hv)
