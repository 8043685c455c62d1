"""Robustness findings: misuse a target accepted, changing itself without saying so (or saying
so and changing anyway), where its contract does not promise typed errors or atomicity.

They are not contract violations (a conforming engine never makes the call), so they never fail
a check by themselves (``--strict-robustness`` makes them); but a caller's bug then corrupts
the cache silently instead of failing loudly, so ``prefixcache check`` lists them in a section
of their own, each with a script that replays it. Families report them with :func:`report`;
the plugin carries them from test reports (xdist workers included) to the session.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Finding:
    """One kind of misuse one target accepted: ``detail`` says what changed; ``script``
    replays it."""

    target: str
    kind: str
    detail: str
    script: str = ""

    @property
    def key(self) -> str:
        return f"{self.target} | {self.kind}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(str(data["target"]), str(data["kind"]), str(data["detail"]),
                   str(data.get("script", "")))

    def __str__(self) -> str:
        return f"[ROBUSTNESS] {self.target}: {self.kind}: {self.detail}"


_seen: set[str] = set()
_pending: list[Finding] = []


def known(target: str, kind: str) -> bool:
    """Whether this process already recorded that misuse of that target (a family need not
    render its script again)."""
    return f"{target} | {kind}" in _seen


def report(finding: Finding) -> bool:
    """Record ``finding`` (the first of each target and kind in this process); whether it was
    new."""
    if finding.key in _seen:
        return False
    _seen.add(finding.key)
    _pending.append(finding)
    return True


def take() -> list[Finding]:
    """The findings recorded since the last call (the plugin attaches them to the report of
    the test that met them)."""
    found = list(_pending)
    _pending.clear()
    return found


def merge(into: dict[str, Finding], found: list[Finding]) -> None:
    """Add ``found`` to the session's findings, the first of each key kept."""
    for finding in found:
        into.setdefault(finding.key, finding)
