"""The one interface through which an allocator family plugs into the core, and the registry.

A *family* is one allocator API generation (the v0 block manager, vLLM v1's ``BlockPool``,
...): its operation vocabulary, model, adapter, state machines and fuzz decoder. The core
(``properties.core``, ``fuzz.core``) imports no family; it reaches one only through a
:class:`Family` object from :func:`by_name` or :func:`select`.

Contracts every family keeps:

- ``runner(target, config)`` returns a :class:`Runner` whose ``execute(op)`` never raises for
  what the target does except a ``Violation`` (a misbehaving target), located at its step;
- ``oracle(config)`` returns an :class:`Oracle` whose ``step`` raises ``Violation`` for a broken
  invariant and ``family.out_of_contract`` (an ``Exception`` subclass) when the program left
  what the model can judge;
- ``op_from_json(op_to_json(op)) == op`` for every operation of the vocabulary;
- every method is deterministic: no draw that is not seeded by its arguments.

Registry: families are declared in the entry-point group ``prefixcache.families`` (each entry
``NAME = "module:attr"`` naming a :class:`Family` object; third-party packages add theirs the
same way). An uninstalled checkout falls back to :data:`BUILTIN` (``module:attr`` strings, so
this module imports no family). :func:`select` picks one for a target: an explicit name wins,
else the first family (the default last) that :meth:`Family.accepts` the spec, else the
default (:data:`DEFAULT_FAMILY`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from models.core.invariants import Family as Invariant

if TYPE_CHECKING:
    from properties.core.targets import Target

#: The entry-point group families are declared in.
ENTRY_POINT_GROUP = "prefixcache.families"
#: The families of this checkout, used when no entry point is installed (``NAME``, ``module:attr``).
BUILTIN: tuple[tuple[str, str], ...] = (
    ("v0", "properties.families.v0.family:FAMILY"),
    ("v1", "properties.families.v1.family:FAMILY"),
)
#: The family a target belongs to when none is named and none accepts it.
DEFAULT_FAMILY = "v0"


class FamilyError(Exception):
    """No family of that name, or a declared family that does not load."""


class Step(Protocol):
    """One executed operation as a runner logs it (what reproducers and shrinking read)."""

    op: Any
    stmts: list[Any]  # ``properties.core.calls.Stmt``: the calls made, for reproducers
    outcome: Any  # the family's outcome: ``error``, ``detail``, ``new_blocks``, ``new_table``


class Runner(Protocol):
    """Drives one fresh allocator of a target (a family's runner)."""

    target: Target
    log: list[Any]  # of :class:`Step`
    adapter: Any

    def execute(self, op: Any) -> tuple[Any, Any]:
        """Run ``op``: its outcome and the snapshot after it; ``Violation`` if the target
        misbehaved."""

    def snapshot(self) -> Any:
        """What the allocator shows now."""


class Oracle(Protocol):
    """Judges a program step by step (a family's model)."""

    def initial_check(self, snapshot: Any) -> None: ...

    def step(self, op: Any, outcome: Any, snapshot: Any) -> None: ...


class Decoder(Protocol):
    """Fuzz bytes to operations, one at a time, following the target's responses (a family's
    fuzz decoder)."""

    config: Any  # the pool shape decoded from the first bytes
    op_starts: list[int]  # the byte offset each operation was decoded from
    src: Any  # its byte source: ``consumed`` bytes so far

    def use_adapter(self, **features: bool) -> None:
        """Offer what the target's adapter finds (:meth:`Family.adapter_features`)."""

    def next_op(self, oracle: Any) -> Any | None:
        """The next operation (None: the input is used up or the program is complete)."""

    def kinds(self) -> frozenset[str]:
        """The operation kinds this decoder can produce."""


class Family(Protocol):
    """One allocator family, as the core sees it. Keep it small: what the core needs."""

    #: Short name (``--family NAME``, xfails, reports): ``"v0"``, ``"v1"``.
    name: str
    #: One line for ``--help`` and report headers.
    description: str
    #: The bundled reference target of the family (``module:callable``).
    default_spec: str
    #: The pytest modules ``prefixcache check`` runs for this family.
    machines_dir: Path
    #: What the oracle raises when a program left what the model can judge (not a failure).
    out_of_contract: type[Exception]
    #: Operation fields that name block handles, and those that name table handles (shrinking
    #: drops the operations using a handle whose creator was dropped, and renumbers the rest).
    block_fields: tuple[str, ...]
    table_fields: tuple[str, ...]
    #: Pool sizes shrinking may lower: ``(config field, smallest value)``, in order.
    pool_fields: tuple[tuple[str, int], ...]
    #: The upstream deviations the model can follow (xfails ``tolerate``): name -> what.
    tolerable: Mapping[str, str]
    #: The invariant families its model and machines check (the report's verdict rows: a
    #: family that is never checked gets no "pass").
    invariants: tuple[Invariant, ...]

    def accepts(self, spec_or_factory: str | Callable[..., Any]) -> bool:
        """Whether the target spec (or the callable it names) speaks this family's API,
        judged without building an allocator."""

    def load_target(self, spec: str | None = None, *, allocator_type: str = "prefix_caching",
                    disable: Iterable[str] = (), step_timeout: float | str | None = None
                    ) -> Target:
        """Resolve ``spec`` (None: the environment's or :attr:`default_spec`) and detect its
        capabilities; ``disable``: feature names to treat as absent, ``step_timeout``: see
        :func:`properties.core.targets.step_timeout_setting`. A family without allocator
        types refuses any but the default one. A target that cannot be built is a
        ``TargetError``."""

    def create(self, target: Target, config: Any) -> Any:
        """A fresh allocator of ``target`` shaped by ``config``."""

    def adapter(self, target: Target, config: Any) -> Any:
        """The family's adapter around a fresh allocator of ``target``."""

    def describe(self, target: Target) -> str:
        """One line: name, version, spec, API and features."""

    def config(self, target: Target, geometry: Mapping[str, int],
               tolerate: frozenset[str] = frozenset()) -> Any:
        """The pool shape ``geometry`` (from :meth:`geometry` or a JSON file) for ``target``,
        with the model following the upstream deviations ``tolerate``."""

    def geometry(self, config: Any) -> dict[str, int]:
        """The JSON-able pool shape of ``config`` (:meth:`config` reads it back)."""

    def tolerating(self, caps: Any, names: frozenset[str]) -> Any:
        """``caps`` with the model following the upstream deviations ``names``; an unknown
        name is a ``ValueError``."""

    def op_from_json(self, data: Mapping[str, Any]) -> Any: ...

    def op_to_json(self, op: Any) -> dict[str, Any]: ...

    def is_op(self, value: object) -> bool:
        """Whether ``value`` is an operation of the vocabulary."""

    def runner(self, target: Target, config: Any) -> Runner: ...

    def oracle(self, config: Any) -> Oracle: ...

    def smaller_ops(self, op: Any, made: Sequence[int]) -> Iterator[tuple[Any, tuple[int, ...]]]:
        """Smaller variants of one operation for shrinking (``made``: the block handles it
        created), each with the handles it no longer creates; none for most operations."""

    def script_prelude(self, target: Target, config: Any, adapter: Any | None = None
                       ) -> list[str]:
        """The first lines of a reproducer script: imports and building the allocator as
        ``alloc``, plus the names the logged calls use (``adapter``: the one that ran them,
        None: a fresh one)."""

    def script_calls(self, target: Target, config: Any, steps: Sequence[Step]) -> list[str]:
        """The reproducer's body: the calls ``steps`` (a runner's log) made, as statements
        on what :meth:`script_prelude` built (v0: the logged calls,
        :func:`properties.core.reproducer.logged_calls`)."""

    def script_check(self, target: Target, config: Any, steps: Sequence[Step]) -> list[str]:
        """What the reproducer's ``__main__`` runs after the calls: the same program replayed
        under the oracle, raising the violation (unindented lines; the core indents them)."""

    # ----------------------------------------------------------------- fuzzing (fuzz.core)

    #: The fuzz harness levels (``python -m fuzz run NAME``), the default first.
    fuzz_levels: tuple[str, ...]
    @property
    def max_ops(self) -> int:
        """The most operations one fuzz input decodes to."""
    #: The levels with a weak-hash mode (:meth:`weak_hash_target`).
    weak_hash_levels: tuple[str, ...]

    def fuzz_level(self, name: str) -> Any:
        """The level called ``name`` (its ``value`` is the name); ``ValueError`` if none."""

    def decoder(self, data: bytes, level: Any, caps: Any, *, max_ops: int) -> Decoder: ...

    def adapter_features(self, runner: Runner) -> dict[str, bool]:
        """What the decoder offers beyond the capabilities: the API the target's adapter
        finds (keyword arguments of :meth:`Decoder.use_adapter`)."""

    def step_features(self, previous: str, op: Any, outcome: Any, snapshot: Any,
                      oracle: Oracle) -> Iterator[tuple[object, ...]]:
        """Behavioural coverage of one judged step for the built-in engine: what it did, not
        which lines ran (an input that makes a step behave in a new way is kept)."""

    def weak_hash_target(self, level: Any) -> Target:
        """The bundled allocator with a deliberately weak hash injected (the weak mode of
        ``level``, one of :attr:`weak_hash_levels`)."""

    def format_program(self, geometry: Mapping[str, int], program: Sequence[Any],
                       outcomes: Sequence[Any] = ()) -> str:
        """The program as text a person reads: the pool shape (:meth:`geometry`), one
        numbered line per operation and (when known) what each step returned."""


_loaded: dict[str, Family] = {}


def _declared() -> list[tuple[str, str]]:
    """``(name, module:attr)`` of every declared family: entry points, then the built-in
    ones not declared there."""
    found = [(ep.name, ep.value)
             for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]
    names = {name for name, _ in found}
    return found + [(name, ref) for name, ref in BUILTIN if name not in names]


def _load(name: str, ref: str) -> Family:
    module_name, _, attr = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise FamilyError(f"family {name!r} ({ref}) does not load: {exc}") from exc
    if getattr(obj, "name", None) != name:
        raise FamilyError(f"family {name!r} ({ref}) names itself {getattr(obj, 'name', None)!r}")
    return obj  # type: ignore[no-any-return]


def names() -> list[str]:
    """The declared family names, in declaration order."""
    return [name for name, _ in _declared()]


def by_name(name: str) -> Family:
    """The family called ``name`` (loaded once)."""
    family = _loaded.get(name)
    if family is not None:
        return family
    for declared, ref in _declared():
        if declared == name:
            family = _loaded[name] = _load(name, ref)
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
