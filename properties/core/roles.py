"""Optional roles a family may take on beyond :class:`properties.core.family.Family`.

Each role is a ``runtime_checkable`` protocol: the core asks ``isinstance(family, Role)`` and
does without what a family does not offer (a family without :class:`PoolShrinking` keeps
its pool sizes when a program shrinks, one without :class:`WeakHashing` has no weak-hash
mode, ...). A family implements a role whole; none fills one with placeholders.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from properties.core.family import Step
    from properties.core.targets import Target


@runtime_checkable
class Building(Protocol):
    """Builds allocators and adapters by hand (tests and probes outside a judge)."""

    def create(self, target: Target, config: Any) -> Any:
        """A fresh allocator of ``target`` shaped by ``config``."""

    def adapter(self, target: Target, config: Any) -> Any:
        """The family's adapter around a fresh allocator of ``target``."""


@runtime_checkable
class Variants(Protocol):
    """A target comes in several variants (``--allocator-type``); each is a separate
    implementation, so a deviation of one is not one of another."""

    #: The variant names, the default first.
    allocator_types: tuple[str, ...]


@runtime_checkable
class PoolShrinking(Protocol):
    """Pool sizes the program shrinker may lower: ``(config field, smallest value)``, in order
    (the config is a dataclass)."""

    pool_fields: tuple[tuple[str, int], ...]


@runtime_checkable
class MechanismKinds(Protocol):
    """Operations that reach one allocator call through different entry points (a block
    table's ``free`` and the allocator's, a swap by hand and ``swap``): an expected failure
    that absorbs both has absorbed one mechanism, not two. Used only to tell defects apart when
    judging an entry's width (``properties.core.baseline.canonical``), never to match."""

    def mechanism_kind(self, kind: str) -> str:
        """The call operation ``kind`` amounts to (``kind`` itself when it is its own; ``""``
        when it makes none, such as an observer's bookkeeping)."""


@runtime_checkable
class HandleShrinking(Protocol):
    """Operations name objects earlier operations created (handles of a few kinds, each
    numbered in creation order): dropping an operation drops those that use what it made, and
    renumbers the rest."""

    #: Handle kind -> the operation fields (``int`` or tuples of ``int``) naming handles of it.
    handle_fields: Mapping[str, tuple[str, ...]]

    def made(self, step: Step) -> Mapping[str, tuple[int, ...]]:
        """Per handle kind, the handles ``step`` created."""

    def smaller_ops(self, op: Any, made: Mapping[str, tuple[int, ...]]
                    ) -> Iterator[tuple[Any, Mapping[str, tuple[int, ...]]]]:
        """Smaller variants of one operation (``made``: the handles it created), each with
        the handles it no longer creates."""


@runtime_checkable
class Tolerating(Protocol):
    """The model can follow named upstream deviations (an xfails entry's ``tolerate``)."""

    #: name -> what the model then accepts.
    tolerable: Mapping[str, str]

    def tolerating(self, caps: Any, names: frozenset[str]) -> Any:
        """``caps`` with the model following ``names``; an unknown name is a ``ValueError``."""


@runtime_checkable
class TokenInputs(Protocol):
    """Operations hand the target's hash integer inputs (an xfails ``match.tokens`` rule)."""

    def tokens_of(self, op: Any) -> Iterable[int]: ...


@runtime_checkable
class WeakHashing(Protocol):
    """The bundled target with a deliberately weak hash, for levels that measure hashing."""

    weak_hash_levels: tuple[str, ...]

    def weak_hash_target(self, level: Any) -> Target: ...
