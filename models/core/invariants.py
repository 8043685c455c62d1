"""Invariants, the sets a family declares, and the violation a judge raises.

An :class:`Invariant` is one named promise an allocator keeps (``RC``: reference counts equal
the live holders, ...). The core knows only the promises every allocator makes, whatever its
API: it answers within the contract's errors (``CRASH``), keeps the calling convention
(``TARGET``), leaves itself as it was when an operation fails (``ATOMIC``) and hands every
request back exactly its own tokens' KV (``CONTENT``). Each family declares its own set as a
subclass of :class:`Invariants`, adding its promises with its own wording; reports, xfails
entries and the zoos key on the short names (``value``). ``docs/INVARIANTS.md`` lists every
family's invariants.

``Family`` is the name a family's model uses for its set (``from models.families.v0.invariants
import Family``); ``Family.RC`` reads like an enum member, ``for inv in Family`` lists the set
(the core's first) and ``Family.lookup("RC")`` finds one by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class Invariant:
    """One named invariant: ``value`` is its short name, ``description`` the promise in the
    declaring family's words. Equal (and hashed) by short name; pickles to the same object."""

    __slots__ = ("_where", "description", "value")

    def __init__(self, value: str, description: str) -> None:
        if not value or not value.isidentifier() or value.upper() != value:
            raise ValueError(f"an invariant's short name is an upper-case identifier: {value!r}")
        self.value = value
        self.description = description
        self._where: tuple[str, str, str] | None = None  # module, class, attribute

    def __set_name__(self, owner: type, name: str) -> None:
        if self._where is None:
            self._where = (owner.__module__, owner.__qualname__, name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Invariant) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"<Invariant {self.value}>"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self._where is None:
            return Invariant, (self.value, self.description)
        return _declared, self._where


def _declared(module: str, qualname: str, attr: str) -> Invariant:
    obj: Any = importlib.import_module(module)
    for part in (*qualname.split("."), attr):
        obj = getattr(obj, part)
    if not isinstance(obj, Invariant):
        raise TypeError(f"{module}.{qualname}.{attr} is not an Invariant")
    return obj


class _InvariantsMeta(type):
    """Iteration over an invariant set, membership and lookup by short name."""

    _members: dict[str, Invariant]

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]
                ) -> _InvariantsMeta:
        cls = super().__new__(mcs, name, bases, namespace)
        members: dict[str, Invariant] = {}
        for base in reversed(cls.__mro__[1:]):
            members.update(getattr(base, "_members", {}))
        for attr, value in namespace.items():
            if isinstance(value, Invariant):
                if attr != value.value:
                    raise ValueError(f"{name}.{attr} is named {value.value!r}")
                members[attr] = value
        cls._members = members
        return cls

    def __iter__(cls) -> Iterator[Invariant]:
        return iter(tuple(cls._members.values()))

    def __len__(cls) -> int:
        return len(cls._members)

    def __contains__(cls, item: object) -> bool:
        return isinstance(item, Invariant) and cls._members.get(item.value) == item

    def lookup(cls, value: str) -> Invariant:
        """The member called ``value``; ``ValueError`` if the set has none."""
        try:
            return cls._members[value]
        except KeyError:
            raise ValueError(f"{value!r} is not an invariant of {cls.__qualname__} "
                             f"(known: {', '.join(cls._members)})") from None


class Invariants(metaclass=_InvariantsMeta):
    """The invariants every allocator keeps; a family's set subclasses it."""

    CRASH = Invariant("CRASH", "the target raises only errors the contract allows")
    TARGET = Invariant("TARGET", "the target returns the API's types, answers in time and "
                                 "leaves the caller's lists alone")
    ATOMIC = Invariant("ATOMIC", "a failed operation leaves the allocator exactly as it was")
    CONTENT = Invariant("CONTENT", "every request reads back exactly its own tokens' KV")


InvariantSet = type[Invariants]


HIGHER_IS_WORSE = "higher is worse"
LOWER_IS_WORSE = "lower is worse"

# The measures the models and checks attach (names are what xfails entries record).
FREE_COUNT_ERROR = "free count error (blocks)"
HIT_RATE_ERROR = "hit rate error"
FREE_QUEUE_ERROR = "ids missing from or extra in the free queue"
KEY_SPREAD_BITS = "key spread (bits)"
COLLIDING_CONTENTS = "colliding contents among the searched"


@dataclass(frozen=True, slots=True)
class Measure:
    """The size of a finding: ``value`` of ``name`` (free-count error, hit-rate error, a key's
    spread in bits), with which way is worse (:data:`HIGHER_IS_WORSE` or
    :data:`LOWER_IS_WORSE`). An adopted expected failure records it and accepts only findings
    no worse (the ratchet)."""

    name: str
    value: float
    direction: str = HIGHER_IS_WORSE

    def __post_init__(self) -> None:
        if self.direction not in (HIGHER_IS_WORSE, LOWER_IS_WORSE):
            raise ValueError(f"measure {self.name!r}: direction must be {HIGHER_IS_WORSE!r} "
                             f"or {LOWER_IS_WORSE!r}, not {self.direction!r}")

    def worse_than(self, other: Measure) -> bool:
        """Whether this value is strictly worse than ``other``'s (same name)."""
        if self.direction == HIGHER_IS_WORSE:
            return self.value > other.value
        return self.value < other.value

    def worst(self, other: Measure) -> Measure:
        return other if other.worse_than(self) else self

    def __str__(self) -> str:
        return f"{self.name} {self.value:g} ({self.direction})"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "direction": self.direction}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measure:
        return cls(str(data["name"]), float(data["value"]),
                   str(data.get("direction", HIGHER_IS_WORSE)))


def worst_of(old: Sequence[Measure], new: Sequence[Measure]) -> tuple[Measure, ...]:
    """Per name, the worse of the two (names of either kept, in first-seen order)."""
    out = {m.name: m for m in old}
    for m in new:
        out[m.name] = out[m.name].worst(m) if m.name in out else m
    return tuple(out.values())


class Violation(Exception):
    """A target broke an invariant: which one, on which operation, expected vs observed; its
    size, when the finding has one (:class:`Measure`)."""

    def __init__(
        self,
        family: Invariant,
        message: str,
        *,
        expected: object = None,
        observed: object = None,
        op: object = None,
        step: int | None = None,
        measure: Measure | Sequence[Measure] | None = None,
    ) -> None:
        self.family = family
        self.message = message
        self.expected = expected
        self.observed = observed
        self.op = op
        self.step = step
        #: The sizes of the finding (none: it has no size); see :class:`Measure`.
        self.measures: tuple[Measure, ...] = (
            () if measure is None else (measure,) if isinstance(measure, Measure)
            else tuple(measure))
        super().__init__(str(self))

    def measured(self, *measures: Measure) -> Violation:
        """The same violation, carrying ``measures`` too (later ones replace same names)."""
        self.measures = tuple({m.name: m for m in (*self.measures, *measures)}.values())
        return self

    def at(self, op: object, step: int) -> Violation:
        """The same violation, located at ``op`` (step ``step`` of the program)."""
        self.op, self.step = op, step
        self.args = (str(self),)
        return self

    def __str__(self) -> str:
        where = "" if self.op is None else f" at step {self.step}: {self.op!r}"
        parts = [f"[{self.family.value}] {self.message}{where}"]
        if self.expected is not None or self.observed is not None:
            parts.append(f"  expected: {self.expected!r}")
            parts.append(f"  observed: {self.observed!r}")
        return "\n".join(parts)
