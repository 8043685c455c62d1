"""``properties.core.draws.draw``: the choices and values of ``data.draw``, and while
Hypothesis prints notes (a failure's final replay, verbose output) every draw is listed with
its label."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import Verbosity, given, seed, settings
from hypothesis import strategies as st

from properties.core.draws import draw

_SETTINGS = settings(max_examples=40, database=None, deadline=None)


def _run(drawing: Callable[[Any, st.SearchStrategy[Any], str], Any]) -> list[Any]:
    """The values one seeded test draws, two labelled draws per example."""
    seen: list[Any] = []

    @seed(20261202)
    @_SETTINGS
    @given(st.data())
    def test(data: st.DataObject) -> None:
        xs = drawing(data, st.lists(st.integers(0, 9), max_size=4), "xs")
        pick = drawing(data, st.sampled_from(xs or [0]), "pick")
        seen.append((xs, pick))

    test()
    return seen


def test_the_same_values_as_data_draw() -> None:
    fast = _run(lambda data, strategy, label: draw(data, strategy, label=label))
    slow = _run(lambda data, strategy, label: data.draw(strategy, label=label))
    assert fast == slow
    assert len({repr(v) for v in fast}) > 5  # it did explore


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
