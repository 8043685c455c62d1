"""``properties.core.draws.draw``: the choices, spans and values of ``data.draw``, and while
Hypothesis prints notes (a failure's final replay, verbose output) every draw is listed with
its label."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Verbosity, given, seed, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture.data import ConjectureData

from properties.core import draws
from properties.core.draws import REPLICATED, draw, fast_drawable, unwrap_strategies

#: The tests of the fast paths themselves, where they apply.
needs_fast_path = pytest.mark.skipif(
    not REPLICATED,
    reason="this Hypothesis keeps its internals in another shape (properties.core.draws."
           "REPLICATED is False): the fast paths are off, every draw is Hypothesis's own")

_SETTINGS = settings(max_examples=40, database=None, deadline=None)

Build = Callable[[], st.SearchStrategy[Any]]


def _run(drawing: Callable[[Any, st.SearchStrategy[Any], str], Any]) -> list[Any]:
    """The values one seeded test draws, three labelled draws per example."""
    seen: list[Any] = []

    @seed(20261202)
    @_SETTINGS
    @given(st.data())
    def test(data: st.DataObject) -> None:
        xs = drawing(data, st.lists(st.integers(0, 9), max_size=4), "xs")
        pick = drawing(data, st.sampled_from(xs or [0]), "pick")
        either = drawing(data, st.one_of(st.none(), st.sampled_from(xs or [1]).map(str),
                                         st.booleans()), "either")
        seen.append((xs, pick, either))

    test()
    return seen


def test_the_same_values_as_data_draw() -> None:
    fast = _run(lambda data, strategy, label: draw(data, strategy, label=label))
    slow = _run(lambda data, strategy, label: data.draw(strategy, label=label))
    assert fast == slow
    assert len({repr(v) for v in fast}) > 5  # it did explore


# Trees of the kinds draw() replicates, with the shapes the machines build: one_of over
# sampled_from / just / booleans / small integers, maps, lists, nested one_ofs, a branch used
# twice.
def _sampled_leaf(r: random.Random) -> Build:
    elements = [r.randrange(99) for _ in range(r.randint(1, 6))]
    return lambda: st.sampled_from(elements)


def _just_leaf(r: random.Random) -> Build:
    value = r.choice([None, 3, (1, 2)])
    return lambda: st.just(value)


def _integers_leaf(r: random.Random) -> Build:
    low, width = r.randint(-3, 3), r.choice([0, 1, 5, 127])
    return lambda: st.integers(low, low + width)


_LEAVES: list[Callable[[random.Random], Build]] = [
    _sampled_leaf, _just_leaf, _integers_leaf,
    lambda r: st.booleans, lambda r: st.none,
]


def _tree(r: random.Random, depth: int = 0) -> Build:
    roll = r.random() if depth < 3 else 0.0
    if roll < 0.45:
        return r.choice(_LEAVES)(r)
    if roll < 0.65:
        inner = _tree(r, depth + 1)
        return lambda: inner().map(repr)
    if roll < 0.75:
        inner = _tree(r, depth + 1)
        return lambda: st.sampled_from([inner, 0]).map(lambda v: v if v == 0 else "s")
    if roll < 0.85:
        inner = _tree(r, depth + 1)
        low = r.choice([0, 0, 1, 3])
        high = r.choice([max(low, 1), low + 1, low + 8, None])  # lists(max_size=0) is just([])
        return lambda: st.lists(inner(), min_size=low, max_size=high)
    parts = [_tree(r, depth + 1) for _ in range(r.randint(1, 4))]
    if r.random() < 0.3:  # the same strategy object twice: one_of keeps it once
        def shared() -> st.SearchStrategy[Any]:
            one = parts[0]()
            return st.one_of(one, *(p() for p in parts[1:]), one)
        return shared
    return lambda: st.one_of(*(p() for p in parts))


def _record(drawing: Callable[[ConjectureData, st.SearchStrategy[Any]], Any], build: Build,
            rng_seed: int) -> tuple[Any, tuple[Any, ...], list[tuple[int, int, int, int]]]:
    data = ConjectureData(random=random.Random(rng_seed))
    values = [drawing(data, build()) for _ in range(3)]  # fresh objects, as the rules build
    data.freeze()
    spans = [(s.label, s.start, s.end, s.depth) for s in data.spans]
    return values, data.choices, spans


@needs_fast_path
@settings(max_examples=300, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(tree_seed=st.integers(0, 2**32 - 1), rng_seed=st.integers(0, 2**32 - 1))
def test_the_fast_path_makes_data_draws_choices_in_its_spans(tree_seed: int,
                                                             rng_seed: int) -> None:
    """For every tree it takes, the fast path draws the same value from the same choices
    inside spans with the same labels, bounds and depths as ``ConjectureData.draw``."""
    build = _tree(random.Random(tree_seed))
    assert fast_drawable(unwrap_strategies(build()))
    slow = _record(lambda data, s: data.draw(s), build, rng_seed)
    fast = _record(lambda data, s: draws._spanned(data, unwrap_strategies(s)), build, rng_seed)
    assert fast == slow


@needs_fast_path
@pytest.mark.parametrize("strategy", [
    st.lists(st.integers(0, 3), unique=True),
    st.lists(st.sampled_from([1, 2, 3]), unique=True),
    st.lists(st.text()),
    st.integers(0, 1000),  # a wide range weights its bounds
    st.integers(min_value=0),
    st.sampled_from([1, 2]).filter(bool),
    st.one_of(st.none(), st.text()),
    st.integers(0, 3).filter(bool).map(str),
])
def test_anything_else_goes_to_data_draw(strategy: st.SearchStrategy[Any]) -> None:
    assert not fast_drawable(unwrap_strategies(strategy))


def test_while_hypothesis_prints_notes_each_draw_is_listed_with_its_label(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Verbose output (like a failure's final replay) takes ``data.draw``'s own path."""

    @settings(_SETTINGS, max_examples=3, verbosity=Verbosity.verbose)
    @given(st.data())
    def test(data: st.DataObject) -> None:
        draw(data, st.integers(0, 9), label="tokens")

    test()
    assert "Draw 1 (tokens): " in capsys.readouterr().out


def test_the_probe_turns_the_fast_paths_off_for_internals_of_another_shape(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis 6.155 imports every name the fast paths use but keeps (kind, function)
    pairs as transformations: the probe must say no, or every machine fails at its first
    step."""
    assert draws._internals_match() is REPLICATED

    class PairShaped:
        _transformations = (("map", int), ("filter", bool))

        def map(self, _: Any) -> PairShaped:
            return self

        def filter(self, _: Any) -> PairShaped:
            return self

    monkeypatch.setattr(draws.st, "sampled_from", lambda _: PairShaped())
    assert draws._internals_match() is False


def test_without_the_fast_paths_machines_keep_upstreams_rule_strategy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hypothesis.stateful import RuleStrategy

    from properties.core import rule_choice
    from properties.families.v0.machines.block_level import BlockLevelMachine

    monkeypatch.setattr(rule_choice, "REPLICATED", False)
    assert type(BlockLevelMachine()._rules_strategy) is RuleStrategy
    monkeypatch.setattr(draws, "REPLICATED", False)
    assert draws.full_draw_needed()
