"""Optional roles through which a family offers its fuzz tools to ``python -m fuzz``.

Like :mod:`properties.core.roles`, each role is a ``runtime_checkable`` protocol on the family
object (:class:`properties.core.family.Family`); ``fuzz.cli`` asks ``isinstance(family, Role)``
and refuses a subcommand whose role the family does not take (exit 2, naming the subcommands
it has). A family implements a role whole; none fills one with placeholders. They live here,
not in :mod:`properties.core.roles`, because only the fuzzers use them.

- :class:`Traces`: ``replay`` (recorded traces judged against a target) and ``traces``
  (re-record the family's shipped traces).
- :class:`Zoo`: ``zoo`` (time to first failure for each known-broken target,
  :mod:`fuzz.core.zoo`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from properties.core.targets import Target


@dataclass(frozen=True, slots=True)
class TraceReplay:
    """One trace replayed: ``ok`` when every step ran and was judged right; ``steps`` of
    ``total`` ran; ``problems``: what stopped it (a violation, a divergence from the recorded
    outcomes, a step the model cannot judge), one line or paragraph each."""

    ok: bool
    steps: int
    total: int
    problems: tuple[str, ...] = ()


@runtime_checkable
class Traces(Protocol):
    """Recorded traces: replayed against any target of the family, and re-recorded."""

    #: The shipped traces (``*.jsonl``); :meth:`record_traces` writes here by default.
    traces_dir: Path

    def replay_trace(self, path: Path, target: Target) -> TraceReplay:
        """The trace at ``path`` run against ``target`` under the model. A file that is not a
        trace of this family is a ``ValueError`` saying why."""

    def record_traces(self, out: Path) -> Sequence[tuple[Path, int]]:
        """Record every workload of the family into ``out`` (created if missing):
        ``(file written, steps)`` per trace, deterministic."""


@dataclass(frozen=True, slots=True)
class ZooMutant:
    """A known-broken target: its spec, its allocator type (None: the family's default), the
    invariants (``Invariant.value``) that may legitimately report it, and the machine levels
    that reach it, in the order to try them (empty: the family's first machine)."""

    spec: str
    invariants: frozenset[str]
    allocator_type: str | None = None
    levels: tuple[str, ...] = ()


@runtime_checkable
class Zoo(Protocol):
    """Known-broken targets the fuzzers must find (``python -m fuzz zoo``)."""

    def zoo(self) -> Mapping[str, ZooMutant]:
        """Every mutant by name, in a stable order."""


def subcommands(family: object) -> list[str]:
    """The ``python -m fuzz`` subcommands ``family`` supports: ``run`` and ``regress`` (its
    machines), then those of its roles here."""
    out = ["run", "regress"]
    if isinstance(family, Traces):
        out += ["replay", "traces"]
    if isinstance(family, Zoo):
        out.append("zoo")
    return out


def _names(values: Collection[object]) -> frozenset[str]:
    """Invariant names of ``values`` (``Invariant`` members or their names)."""
    return frozenset(str(getattr(v, "value", v)) for v in values)


def zoo_mutant(spec: str, invariants: Collection[object],
               allocator_type: str | None = None, levels: Sequence[str] = ()) -> ZooMutant:
    """A :class:`ZooMutant` from invariants given as ``Invariant`` members or names."""
    return ZooMutant(spec, _names(invariants), allocator_type, tuple(levels))
