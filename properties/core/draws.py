"""Interactive draws for the state machines' rules: :func:`draw` is ``data.draw(strategy,
label=label)`` with the same choices and spans, minus the per-draw bookkeeping that only
Hypothesis's report of a failure uses.

``DataObject.draw`` wraps every draw in a check that the strategy left the ``random``
module's state alone (two ``random.getstate()`` copies of 625 ints), records the draw for the
explain phase (off in every profile here) and formats a description for the printed notes.
``ConjectureData.draw`` then validates every (fresh) strategy of the tree before drawing:
most of a rule's draw time, since the rules build their strategies from the machine's state
at each step. For the strategies the rules build (``sampled_from``, ``just``, ``booleans``,
bounded ``integers``, and ``one_of``, ``map`` and plain ``lists`` over them) :func:`draw`
makes the choices itself, exactly as those strategies' ``do_draw`` would (the same primitive
draws with the same constraints, inside spans with the same labels, nested the same way), so
a seeded or derandomized run generates exactly what it did; anything else goes to
``ConjectureData.draw``. (Switching a machine's call sites to :func:`draw` edits the class,
and a derandomized run's seed is derived from the class's source: that re-seeds it.)

While Hypothesis prints notes (the final replay of a failure, or verbose output) or
observability is on, the full ``data.draw`` runs, so the report still lists each draw with
its label. Not replicated on the fast path: values recorded for the shrinker's value-hole
pass and the build context's record of ``map`` calls (both read only while shrinking or
explaining a failure, whose final replay takes the full path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import strategies as st

try:  # private to Hypothesis: without them, every draw is ``data.draw``
    from hypothesis.control import should_note
    from hypothesis.errors import FlakyStrategyDefinition, UnsatisfiedAssumption
    from hypothesis.internal.conjecture.data import MAX_DEPTH, ConjectureData
    from hypothesis.internal.conjecture.utils import combine_labels, many
    from hypothesis.internal.observability import observability_enabled
    from hypothesis.strategies._internal.collections import ListStrategy
    from hypothesis.strategies._internal.lazy import unwrap_strategies as _unwrap_untyped
    from hypothesis.strategies._internal.misc import BooleansStrategy, JustStrategy
    from hypothesis.strategies._internal.numbers import IntegersStrategy
    from hypothesis.strategies._internal.strategies import (
        MAPPED_SEARCH_STRATEGY_DO_DRAW_LABEL,
        MappedStrategy,
        OneOfStrategy,
        SampledFromStrategy,
    )
except ImportError:  # pragma: no cover - an older or newer Hypothesis
    should_note = None  # type: ignore[assignment]

try:  # the shrinker's value holes (newer Hypothesis); absent, there are none to honour
    from hypothesis.internal.conjecture.choice import ValueHole

    _PREFIX_HOLES: tuple[type, ...] = (ValueHole,)
except ImportError:  # pragma: no cover
    _PREFIX_HOLES = ()

__all__ = ["REPLICATED", "at_value_hole", "draw", "fast_drawable", "full_draw_needed",
           "nested_draw"]


def _internals_match() -> bool:
    """Whether this Hypothesis keeps what the fast paths read, in the shape they read it:
    each strategy transformation as (kind, function, location), the filter-call cap, and the
    last rejected filter on the data. Importable names alone do not say so: Hypothesis
    6.155 has them all, with (kind, function) pairs."""
    try:
        probe: Any = st.sampled_from((0, 1)).map(int).filter(bool)
        return (should_note is not None  # the imports above succeeded
                and all(len(step) == 3 for step in probe._transformations)
                and isinstance(getattr(SampledFromStrategy, "_MAX_FILTER_CALLS", None), int)
                and callable(getattr(ConjectureData, "last_rejected_filter_location", None)))
    except Exception:  # pragma: no cover - internals of another shape
        return False


#: Whether :func:`draw`, :func:`nested_draw` and ``properties.core.rule_choice`` replicate
#: this Hypothesis; if not, every draw takes Hypothesis's own path.
REPLICATED = _internals_match()

T = TypeVar("T")

unwrap_strategies: Callable[[Any], Any] = _unwrap_untyped  # a lazy strategy's real one

#: IntegersStrategy weights its bounds when the range is wider than this (not replicated).
_UNWEIGHTED_SPAN = 127


def draw(data: st.DataObject, strategy: st.SearchStrategy[T], label: str | None = None) -> T:
    """``data.draw(strategy, label=label)``: the same value from the same choices."""
    conjecture: Any = getattr(data, "conjecture_data", None)
    if conjecture is None or full_draw_needed():
        return data.draw(strategy, label=label)
    unwrapped = unwrap_strategies(strategy)
    if at_value_hole(conjecture) or not fast_drawable(unwrapped):
        return conjecture.draw(strategy)  # type: ignore[no-any-return]
    return _spanned(conjecture, unwrapped)  # type: ignore[no-any-return]


def full_draw_needed() -> bool:
    """Whether draws must take Hypothesis's own path: notes are printed (a failure's final
    replay, verbose output), observability is on, or this Hypothesis lacks what the fast path
    replicates. Call inside a test only."""
    return not REPLICATED or should_note() or observability_enabled()


def nested_draw(data: ConjectureData, strategy: st.SearchStrategy[T]) -> T:
    """``data.draw(strategy)`` from inside another strategy's ``do_draw`` (not at the test's
    top level): the same checks, span and choices; a :func:`fast_drawable` tree's choices are
    made here, any other strategy's ``do_draw`` runs inside its span."""
    strategy.validate()
    unwrapped = unwrap_strategies(strategy)
    if unwrapped.is_empty or data.depth >= MAX_DEPTH or at_value_hole(data):
        return data.draw(strategy)
    if fast_drawable(unwrapped):
        return _spanned(data, unwrapped)  # type: ignore[no-any-return]
    data.start_span(unwrapped.label)
    try:
        return unwrapped.do_draw(data)  # type: ignore[no-any-return]
    except FlakyStrategyDefinition as err:
        err.add_note(f"while drawing from {strategy!r}")
        raise
    finally:
        data.stop_span()


def fast_drawable(strategy: Any) -> bool:
    """Whether :func:`draw` makes ``strategy``'s choices itself: a tree of the kinds below,
    none of which can be empty or filter, whose draws it replicates."""
    kind = type(strategy)
    if kind is SampledFromStrategy or kind is JustStrategy:
        return all(name == "map" for name, _, _ in strategy._transformations)
    if kind is BooleansStrategy:
        return True
    if kind is IntegersStrategy:
        start, end = strategy.start, strategy.end
        return start is not None and end is not None and end - start <= _UNWEIGHTED_SPAN
    if kind is MappedStrategy:
        return fast_drawable(unwrap_strategies(strategy.mapped_strategy))
    if kind is OneOfStrategy:
        return all(fast_drawable(unwrap_strategies(s)) for s in strategy.original_strategies)
    if kind is ListStrategy:  # not its unique subclasses
        return _MANY_IS_A_CONTEXT and fast_drawable(unwrap_strategies(strategy.element_strategy))
    return False


def _spanned(data: ConjectureData, strategy: Any) -> Any:
    """``data.draw(strategy)`` for an unwrapped :func:`fast_drawable` strategy: its span,
    labelled as Hypothesis labels it, around its ``do_draw``."""
    data.start_span(strategy.label)
    try:
        return _DO_DRAW[type(strategy)](data, strategy)
    finally:
        data.stop_span()


def _sampled(data: ConjectureData, strategy: Any) -> Any:
    # SampledFromStrategy.do_filtered_draw without filters: the first index drawn is kept
    element = strategy.elements[data.draw_integer(0, len(strategy.elements) - 1)]
    return _mapped_element(strategy, element)


def _just(data: ConjectureData, strategy: Any) -> Any:
    return _mapped_element(strategy, strategy.elements[0])  # draws nothing, as just() does


def _mapped_element(strategy: Any, element: Any) -> Any:
    for _, function, _ in strategy._transformations:
        element = function(element)
    return element


def _booleans(data: ConjectureData, strategy: Any) -> Any:
    return data.draw_boolean()


def _integers(data: ConjectureData, strategy: Any) -> Any:
    return data.draw_integer(min_value=strategy.start, max_value=strategy.end)


def _mapped(data: ConjectureData, strategy: Any) -> Any:
    # MappedStrategy.do_draw: up to three tries, each in its own (discarded on failure) span
    inner = unwrap_strategies(strategy.mapped_strategy)
    failed: UnsatisfiedAssumption | None = None
    for _ in range(3):
        data.start_span(MAPPED_SEARCH_STRATEGY_DO_DRAW_LABEL)
        discard = False
        try:
            return strategy.pack(_spanned(data, inner))
        except UnsatisfiedAssumption as err:
            failed = err
            discard = True
        finally:
            data.stop_span(discard=discard)
    raise failed  # type: ignore[misc]


def _list(data: ConjectureData, strategy: Any) -> Any:
    # ListStrategy.do_draw for elements that cannot be empty: many() decides each length step
    element = unwrap_strategies(strategy.element_strategy)
    with many(data, min_size=strategy.min_size, max_size=strategy.max_size,
              average_size=strategy.average_size) as elements:
        return [_spanned(data, element) for _ in elements]


def _one_of(data: ConjectureData, strategy: Any) -> Any:
    # OneOfStrategy.do_draw over its flattened, deduplicated branches (none can be empty
    # here): one branch alone is drawn directly, else a sampled_from of the branches picks
    branches = _branches(strategy)
    if len(branches) == 1:
        return _spanned(data, unwrap_strategies(branches[0]))
    data.start_span(combine_labels(_SAMPLER_CLASS_LABEL, *(b.label for b in branches)))
    try:
        chosen = branches[data.draw_integer(0, len(branches) - 1)]
    finally:
        data.stop_span()
    return _spanned(data, unwrap_strategies(chosen))


def _branches(strategy: Any) -> list[Any]:
    """``OneOfStrategy.element_strategies`` for a tree with no empty strategy."""
    seen: set[int] = {id(strategy)}
    branches: list[Any] = []
    for original in strategy.original_strategies:
        for branch in _branches_of(original):
            if id(branch) not in seen:
                seen.add(id(branch))
                branches.append(branch)
    return branches


def _branches_of(strategy: Any) -> list[Any]:
    """``strategy.branches``: a one_of's elements, a map over each of its inner strategy's
    branches, else the strategy itself (a lazy one unwrapped only when drawn)."""
    kind = type(strategy)
    if kind is OneOfStrategy:
        return _branches(strategy)
    if kind is MappedStrategy:  # a fresh map object per branch, as Hypothesis builds them
        pack = strategy.pack
        return [MappedStrategy(b, pack=pack) for b in _branches_of(strategy.mapped_strategy)]
    return [strategy]


def at_value_hole(data: ConjectureData) -> bool:
    """Whether the next prefix choice is a shrinker's value hole (only ``data.draw``
    re-encodes those)."""
    prefix = data.prefix
    return (
        bool(_PREFIX_HOLES)
        and prefix is not None
        and data.index < len(prefix)
        and isinstance(prefix[data.index], _PREFIX_HOLES)
    )


_DO_DRAW: dict[type, Callable[[ConjectureData, Any], Any]] = {}
#: many() as ``with many(...) as elements`` (older Hypothesis had an explicit-call form)
_MANY_IS_A_CONTEXT = should_note is not None and hasattr(many, "__enter__")
if should_note is not None:
    _DO_DRAW.update({
        SampledFromStrategy: _sampled,
        JustStrategy: _just,
        BooleansStrategy: _booleans,
        IntegersStrategy: _integers,
        MappedStrategy: _mapped,
        OneOfStrategy: _one_of,
        ListStrategy: _list,
    })
    _SAMPLER_CLASS_LABEL = SampledFromStrategy([0]).class_label
