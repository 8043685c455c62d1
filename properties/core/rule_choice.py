"""Rule choice for the state machines: :class:`RuleChoice` is Hypothesis's ``RuleStrategy``
with the same choices, spans and results, minus per-step overhead.

Every step of a ``RuleBasedStateMachine`` draws its rule from a ``sampled_from`` of the rules
filtered by "precondition holds and the swarm flag is on", then the rule's arguments. Upstream
pays, per rule it considers (about nine per step here), a precondition description built by
string formatting and a ``get_pretty_function_description`` lookup, and per element tried a
generic ``_transform`` walk; the filtered draw and every argument go through
``ConjectureData.draw``. :class:`RuleChoice` keeps each rule's precondition descriptions, so
the observability counts are the ones upstream records, and makes the filtered draw's choices
itself, exactly as ``SampledFromStrategy.do_filtered_draw`` would (three rejection tries, then
a speculative index, then a forced index, inside the filtered strategy's span), so a seeded or
derandomized run generates exactly what it did. Arguments go through
:func:`properties.core.draws.nested_draw`.

The full upstream path runs while Hypothesis prints notes (the final replay of a failure,
verbose output) or observability is on, and for any part of the draw that starts at a
shrinker's value hole (only ``ConjectureData.draw`` re-encodes those).
"""

from __future__ import annotations

from typing import Any

from hypothesis.errors import InvalidDefinition
from hypothesis.stateful import RuleBasedStateMachine, RuleStrategy

from properties.core.draws import REPLICATED, at_value_hole, full_draw_needed, nested_draw

try:  # private to Hypothesis: without them, every rule is drawn upstream's way
    from hypothesis.internal.conjecture.utils import calc_label_from_cls
    from hypothesis.internal.reflection import get_pretty_function_description
    from hypothesis.strategies._internal.strategies import SampledFromStrategy
except ImportError:  # pragma: no cover - an older or newer Hypothesis
    get_pretty_function_description = None  # type: ignore[assignment]

__all__ = ["RuleChoice", "install"]

#: One rule's validity check: the bundles it needs non-empty and its preconditions, each with
#: the description upstream counts it under.
_Check = tuple[tuple[str, ...], tuple[tuple[Any, str], ...]]


class RuleChoice(RuleStrategy):
    """``RuleStrategy`` for ``machine``: the same draws, done without per-step rebuilding."""

    def __init__(self, machine: RuleBasedStateMachine) -> None:
        super().__init__(machine)
        filtered: Any = self._enabled_rules_strategy  # a SampledFromStrategy (or JustStrategy)
        # sampled_from of one rule is a just(): its filtered draw is not replicated
        self._sampled = type(filtered) is SampledFromStrategy
        self._elements: tuple[Any, ...] = tuple(filtered.elements)
        self._checks = _checks_for(type(machine), self._elements)
        self._index = {id(rule): i for i, rule in enumerate(self._elements)}
        self._names = tuple(rule.function.__name__ for rule in self._elements)
        ((_, predicate, location),) = filtered._transformations
        self._rejected = (predicate, location)
        self._filter_calls = filtered._MAX_FILTER_CALLS - 3
        self._retry_event: str | None = None
        filtered.validate()
        self.enabled_rules_strategy.validate()

    def calc_label(self) -> int:
        """Upstream's label (a strategy's label derives from its class): each step's span is
        labelled as upstream labels it."""
        return calc_label_from_cls(RuleStrategy)

    def __repr__(self) -> str:  # upstream's, as the retry event names the filter with it
        return f"RuleStrategy(machine={self.machine.__class__.__name__}({{...}}))"

    def is_valid(self, rule: Any) -> bool:
        return self._valid(self._index[id(rule)])

    def _valid(self, index: int) -> bool:
        """Upstream's ``is_valid`` for the rule at ``index`` of the sampled rules."""
        machine = self.machine
        bundles, preconditions = self._checks[index]
        for name in bundles:
            if not machine.bundle(name):
                return False
        if preconditions:
            predicates = machine._observability_predicates
            for predicate, where in preconditions:
                holds = predicate(machine)
                predicates[where].update_count(condition=holds)
                if not holds:
                    return False
        return True

    def do_draw(self, data: Any) -> tuple[Any, dict[Any, Any]]:
        if full_draw_needed():
            return super().do_draw(data)
        if not any(map(self._valid, range(len(self._elements)))):
            names = ", ".join(self._names)
            raise InvalidDefinition(
                f"No progress can be made from state {self.machine!r}, because no available "
                f"rule had a True precondition. rules: {names}") from None
        self._feature_flags = nested_draw(data, self.enabled_rules_strategy)
        if not self._sampled or at_value_hole(data):
            rule = data.draw(self._enabled_rules_strategy)
        else:
            data.start_span(self._enabled_rules_strategy.label)
            try:
                rule = self._filtered_draw(data)
            finally:
                data.stop_span()
        arguments = {}
        for key, strategy in rule.arguments_strategies.items():
            try:
                arguments[key] = nested_draw(data, strategy)
            except Exception as err:
                err.add_note(f"while generating {key!r} from {strategy!r} for rule "
                             f"{rule.function.__name__}")
                raise
        return rule, arguments

    def _enabled(self, data: Any, index: int) -> bool:
        """The filter: the rule's precondition holds and its swarm flag is on (upstream's
        ``_rule_is_enabled``; a rejection is recorded as upstream's ``_transform`` does)."""
        flags = self._feature_flags
        if self._valid(index) and flags is not None and flags.is_enabled(self._names[index]):
            return True
        data._last_rejected_filter = self._rejected
        return False

    def _filtered_draw(self, data: Any) -> Any:
        """``SampledFromStrategy.do_draw`` of the filtered rules, choice for choice."""
        elements = self._elements
        last = len(elements) - 1
        bad: set[int] = set()
        for _ in range(3):
            i = data.draw_integer(0, last)
            if i not in bad:
                if self._enabled(data, i):
                    return elements[i]
                if not bad:
                    if self._retry_event is None:
                        self._retry_event = (f"Retried draw from {self._enabled_rules_strategy!r}"
                                             " to satisfy filter")
                    data.events[self._retry_event] = ""
                bad.add(i)
        good = min(len(elements) - len(bad), self._filter_calls)
        if good > 0:
            speculative = data.draw_integer(0, good - 1)
            allowed: list[int] = []
            for i in range(min(len(elements), self._filter_calls)):
                if i not in bad and self._enabled(data, i):
                    allowed.append(i)
                    if len(allowed) > speculative:
                        data.draw_integer(0, last, forced=i)
                        return elements[i]
            if allowed:
                i = data.choice(allowed)
                data.draw_integer(0, last, forced=i)
                return elements[i]
        data.mark_invalid(f"Aborted test because unable to satisfy "
                          f"{self._enabled_rules_strategy!r}",
                          location=data.last_rejected_filter_location())
        raise AssertionError("mark_invalid returned")  # pragma: no cover - it raises StopTest


def _checks_for(machine_type: type, rules: tuple[Any, ...]) -> tuple[_Check, ...]:
    """Per rule, what upstream's ``is_valid`` evaluates, with the precondition descriptions it
    formats on every call (the same strings; computed once per machine class and rules)."""
    known = _CHECKS.get(machine_type)
    if known is not None and len(known[0]) == len(rules) \
            and all(a is b for a, b in zip(known[0], rules, strict=True)):
        return known[1]
    checks = _build_checks(machine_type, rules)
    _CHECKS[machine_type] = (rules, checks)
    return checks


#: :func:`_checks_for` by machine class: the rules they were built for, and the checks.
_CHECKS: dict[type, tuple[tuple[Any, ...], tuple[_Check, ...]]] = {}


def _build_checks(machine_type: type, rules: tuple[Any, ...]) -> tuple[_Check, ...]:
    desc = f"{machine_type.__qualname__}, rule "
    checks = []
    for rule in rules:
        where = f"{desc}{rule.function.__name__}, precondition "
        checks.append((
            tuple(bundle.name for bundle in rule.bundles),
            tuple((pred, where + get_pretty_function_description(pred))
                  for pred in rule.preconditions),
        ))
    return tuple(checks)


def install(machine: RuleBasedStateMachine) -> None:
    """Give ``machine`` a :class:`RuleChoice` (call after ``RuleBasedStateMachine.__init__``);
    leaves upstream's strategy where this Hypothesis lacks what it replicates."""
    if REPLICATED and get_pretty_function_description is not None \
            and hasattr(machine, "_rules_strategy"):
        machine._rules_strategy = RuleChoice(machine)
