"""Interactive draws for the state machines' rules: :func:`draw` is ``data.draw(strategy,
label=label)`` with the same choices, minus the per-draw bookkeeping that only Hypothesis's
report of a failure uses.

``DataObject.draw`` wraps every draw in a check that the strategy left the ``random``
module's state alone (two ``random.getstate()`` copies of 625 ints), records the draw for the
explain phase (off in every profile here) and formats a description for the printed notes.
Skipping that saves about a tenth of a block-machine run (2.39 -> 2.18 s of CPU, best of
three). The choice sequence comes from the draw itself (``ConjectureData.draw``, which opens
the same span), so a seeded run draws exactly what it did. (Switching a machine's call sites
to it edits the class, and a derandomized run's seed is derived from the class's source: that
re-seeds it.) While Hypothesis prints notes (the final replay of a failure, or verbose
output) or observability is on, the full ``data.draw`` runs, so the report still lists each
draw with its label.
"""

from __future__ import annotations

from typing import Any, TypeVar

from hypothesis import strategies as st

try:  # private to Hypothesis: without them, every draw is ``data.draw``
    from hypothesis.control import should_note
    from hypothesis.internal.observability import observability_enabled
except ImportError:  # pragma: no cover - an older or newer Hypothesis
    should_note = None  # type: ignore[assignment]

__all__ = ["draw"]

T = TypeVar("T")


def draw(data: st.DataObject, strategy: st.SearchStrategy[T], label: str | None = None) -> T:
    """``data.draw(strategy, label=label)``: the same value from the same choices."""
    conjecture: Any = getattr(data, "conjecture_data", None)
    if conjecture is None or should_note is None or should_note() or observability_enabled():
        return data.draw(strategy, label=label)
    return conjecture.draw(strategy)  # type: ignore[no-any-return]
