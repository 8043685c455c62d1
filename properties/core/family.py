"""The one interface through which an allocator family plugs into the core, and the registry.

A *family* is one allocator API (a block manager, a block pool, a radix cache, ...): how to
load a target, its operation vocabulary, a *judge* that runs one operation on a target and on
the family's model side by side, the Hypothesis machines that generate programs, and how a
program is written as a script. The core (``properties.core``, ``fuzz.core``) imports no
family; it reaches one only through a :class:`Family` object from :func:`by_name` or
:func:`select`. Everything a family *may* add (shrinking hints, tolerated deviations, fuzzing,
a weak-hash mode, building allocators by hand, ...) is an optional role in
:mod:`properties.core.roles`, detected with ``isinstance``: a family implements a role whole or
not at all, and never fills one with placeholders.

Contracts every family keeps:

- ``family.judge(target, config)`` builds a fresh allocator and the model, and checks the
  fresh state (a ``Violation`` for a misbehaving factory); ``judge.step(op)`` runs one
  operation on both and returns the target's outcome, or raises a ``Violation`` located at the
  operation (``violation.at(op, index)``) or ``family.out_of_contract`` when the program left
  what the model can judge. It logs every step it ran in ``judge.log``.
- ``vocabulary.op_from_json(vocabulary.op_to_json(op)) == op`` for every operation, and every
  operation has a ``kind`` (a short string naming its type).
- Every method is deterministic: no draw that is not seeded by its arguments.

Registry: families are declared in the entry-point group ``prefixcache.families`` (each entry
``NAME = "module:attr"`` naming a :class:`Family` object; third-party packages add theirs the
same way). An uninstalled checkout falls back to :data:`BUILTIN`, read from its own
``pyproject.toml``. A family can also be named
by its ``module:attr`` reference wherever a family name is accepted (``--family
mypackage.family:FAMILY``). :func:`select` picks one for a target: an explicit name wins, else
the first family (the default last) that :meth:`Family.accepts` the spec, else the default
(:data:`DEFAULT_FAMILY`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from models.core.invariants import InvariantSet

if TYPE_CHECKING:
    from properties.core.targets import Target

#: The entry-point group families are declared in.
ENTRY_POINT_GROUP = "prefixcache.families"
#: This checkout's ``pyproject.toml``, whose ``prefixcache.families`` entry points are read when
#: none is installed (a checkout run in place, or an install older than its families).
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _checkout_families(pyproject: Path = PYPROJECT) -> tuple[tuple[str, str], ...]:
    """``(NAME, module:attr)`` of the families ``pyproject`` declares (none if it is absent)."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return ()
    group = data.get("project", {}).get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    return tuple((str(name), str(ref)) for name, ref in group.items())


#: The families of this checkout, used where no entry point declares them.
BUILTIN: tuple[tuple[str, str], ...] = _checkout_families()
#: Families declared for this process and its children: ``NAME=module:attr`` pairs, comma
#: separated (a family named by reference is added here, so subprocesses find it by name).
ENV_VAR = "PREFIXCACHE_FAMILIES"
#: The family a target belongs to when none is named and none accepts it.
DEFAULT_FAMILY = "v0"


class FamilyError(Exception):
    """No family of that name, or a declared family that does not load."""


class Step(Protocol):
    """One operation a judge ran: the operation and the target's outcome."""

    op: Any
    outcome: Any


class Judge(Protocol):
    """A fresh allocator of one target and the family's model, side by side."""

    @property
    def log(self) -> Sequence[Step]:
        """The steps run so far, in order."""

    def step(self, op: Any) -> Any:
        """Run ``op`` on the target and the model: the target's outcome; a located
        ``Violation`` if the target broke an invariant or misbehaved; the family's
        ``out_of_contract`` if the model cannot judge the program from here on."""


class Vocabulary(Protocol):
    """The family's operations and pool shapes, with their JSON form."""

    def op_to_json(self, op: Any) -> dict[str, Any]: ...

    def op_from_json(self, data: Mapping[str, Any]) -> Any: ...

    def is_op(self, value: object) -> bool:
        """Whether ``value`` is an operation of the vocabulary."""

    def config(self, target: Target, geometry: Mapping[str, Any]) -> Any:
        """The pool shape ``geometry`` (JSON, from :meth:`geometry`) for ``target``."""

    def geometry(self, config: Any) -> dict[str, Any]:
        """The JSON form of a pool shape (:meth:`config` reads it back)."""


@dataclass(frozen=True, slots=True)
class TargetOptions:
    """How to load a target: ``allocator_type`` (the variant of the target the family builds;
    None: the family's default), ``disable`` (capabilities to treat as absent) and
    ``step_timeout`` (see :func:`properties.core.targets.step_timeout_setting`)."""

    allocator_type: str | None = None
    disable: tuple[str, ...] = ()
    step_timeout: float | str | None = None


class Script(NamedTuple):
    """A reproducer's family parts: ``body`` builds the allocator and makes the calls;
    ``check`` replays the same program under the judge (``__main__`` runs it)."""

    body: list[str]
    check: list[str]


class Family(Protocol):
    """One allocator family, as the core sees it: the names every family supplies."""

    #: Short name (``--family NAME``, xfails, reports).
    name: str
    #: One line for ``--help`` and report headers.
    description: str
    #: The bundled reference target of the family (``module:callable``).
    default_spec: str
    #: What its judge raises when a program left what the model can judge (not a failure).
    out_of_contract: type[Exception]
    #: The generator: the folder of pytest modules (its Hypothesis machines and the replay of
    #: expected failures) that ``prefixcache check`` runs.
    machines: Path

    @property
    def invariants(self) -> InvariantSet:
        """The invariants it judges (the core's universal ones and its own): the report's
        verdict rows, in its own words."""

    @property
    def vocabulary(self) -> Vocabulary:
        """Operations and pool shapes, and their JSON form."""

    def accepts(self, spec_or_factory: str | Callable[..., Any]) -> bool:
        """Whether the target spec (or the callable it names) speaks this family's API,
        judged without building an allocator."""

    def load_target(self, spec: str | None, options: TargetOptions) -> Target:
        """Resolve ``spec`` (None: the environment's or :attr:`default_spec`) and detect its
        capabilities. A target that cannot be loaded or built is a ``TargetError`` that
        says what is missing."""

    def judge(self, target: Target, config: Any) -> Judge:
        """A fresh allocator of ``target`` shaped by ``config``, judged by the model."""

    def script(self, target: Target, config: Any, steps: Sequence[Step],
               judge: Judge | None = None) -> Script:
        """The reproducer of ``steps`` (a judge's log; ``judge``: the one that ran them, to
        name the modules its calls used; None: a fresh one)."""


_loaded: dict[str, Family] = {}


def _declared() -> list[tuple[str, str]]:
    """``(name, module:attr)`` of every declared family: entry points, those of
    ``$PREFIXCACHE_FAMILIES``, then the built-in ones not declared there."""
    found = [(ep.name, ep.value)
             for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]
    for pair in os.environ.get(ENV_VAR, "").split(","):
        name, sep, ref = pair.strip().partition("=")
        if sep and name and ref and all(name != n for n, _ in found):
            found.append((name, ref))
    names = {name for name, _ in found}
    return found + [(name, ref) for name, ref in BUILTIN if name not in names]


def _load(name: str | None, ref: str) -> Family:
    module_name, _, attr = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise FamilyError(f"family {name or ref!r} ({ref}) does not load: {exc}") from exc
    own = getattr(obj, "name", None)
    if name is not None and own != name:
        raise FamilyError(f"family {name!r} ({ref}) names itself {own!r}")
    if not isinstance(own, str) or not own:
        raise FamilyError(f"{ref} is not a family (it has no name)")
    return obj  # type: ignore[no-any-return]


def names() -> list[str]:
    """The declared family names, in declaration order."""
    return [name for name, _ in _declared()]


def by_name(name: str) -> Family:
    """The family called ``name`` (loaded once), or the one a ``module:attr`` reference
    names."""
    family = _loaded.get(name)
    if family is not None:
        return family
    for declared, ref in _declared():
        if declared == name:
            family = _loaded[name] = _load(name, ref)
            return family
    if ":" in name:
        family = _load(None, name)
        _loaded[name] = _loaded[family.name] = family
        declared = os.environ.get(ENV_VAR, "")
        os.environ[ENV_VAR] = f"{declared},{family.name}={name}".lstrip(",")
        return family
    raise FamilyError(f"no family {name!r}; known: {', '.join(names())}")


def default() -> Family:
    return by_name(DEFAULT_FAMILY)


def families() -> Iterator[Family]:
    """Every declared family, the default last (detection order)."""
    ordered = [n for n in names() if n != DEFAULT_FAMILY] + [DEFAULT_FAMILY]
    for name in ordered:
        yield by_name(name)


def select(spec: str | Callable[..., Any] | None = None, family: str | None = None) -> Family:
    """The family for target ``spec``: ``family`` if named, else the first that accepts the
    spec (non-default families first), else the default."""
    if family:
        return by_name(family)
    if spec:
        for candidate in families():
            if candidate.accepts(spec):
                return candidate
    return default()
