"""``properties.core.rule_choice.RuleChoice``: the rules, arguments, choices, spans, events and
precondition counts of Hypothesis's own ``RuleStrategy``, on random machines; and the
machines use it."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.control import BuildContext
from hypothesis.errors import InvalidDefinition, StopTest
from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    RuleStrategy,
    VarReference,
    precondition,
    rule,
)

from properties.core.rule_choice import RuleChoice
from tests.test_draws import needs_fast_path

pytestmark = needs_fast_path

_ARGUMENTS: list[dict[str, Any]] = [
    {},
    {"x": st.integers(0, 3)},
    {"data": st.data()},
    {"s": st.sampled_from("abc"), "flag": st.booleans()},
    {"xs": st.lists(st.integers(0, 5), max_size=3)},
    {"wide": st.integers(0, 10**6)},  # not on the fast path: data.draw's own
]


def _machine(r: random.Random) -> type[RuleBasedStateMachine]:
    """A machine of 1-30 rules: preconditions on a state the rules change, arguments of the
    kinds the machines use, a bundle that some rules fill and others need."""

    class Machine(RuleBasedStateMachine):
        things = Bundle("things")

        def __init__(self) -> None:
            super().__init__()
            self.state = 0

    for index in range(r.randint(1, 30)):
        arguments = dict(r.choice(_ARGUMENTS))
        if r.random() < 0.2:
            arguments["thing"] = Machine.things
        fills = r.random() < 0.3

        def body(self: Any, _index: int = index, _fills: bool = fills, **kwargs: Any) -> Any:
            self.state = (self.state * 31 + _index + len(repr(sorted(kwargs)))) % 997
            return self.state if _fills else None

        body.__name__ = f"rule_{index}"
        decorated = rule(target=Machine.things, **arguments)(body) if fills \
            else rule(**arguments)(body)
        for _ in range(r.choice([0, 0, 1, 2])):
            modulus, residue = r.randint(2, 5), r.randint(0, 4)
            decorated = precondition(
                lambda m, modulus=modulus, residue=residue: m.state % modulus != residue
            )(decorated)
        setattr(Machine, body.__name__, decorated)
    return Machine


def _drive(machine_type: type[RuleBasedStateMachine], strategy_type: type[RuleStrategy],
           rng_seed: int, steps: int = 25) -> tuple[Any, ...]:
    """Run ``steps`` rule draws (and the rules) on one seeded ``ConjectureData``; everything
    the draws left behind."""
    data = ConjectureData(random=random.Random(rng_seed))
    chosen: list[Any] = []
    with BuildContext(data, wrapped_test=lambda: None):
        machine = machine_type()
        data.hypothesis_runner = machine  # bundles are drawn from the runner
        machine._observability_predicates = data._observability_predicates
        strategy = strategy_type(machine)
        try:
            for _ in range(steps):
                chosen_rule, arguments = data.draw(strategy)
                values = {k: machine.names_to_values[v.name] if isinstance(v, VarReference)
                          else v for k, v in arguments.items()}
                result = chosen_rule.function(machine, **values)
                if chosen_rule.targets:
                    machine._add_results_to_targets(chosen_rule.targets, [result])
                chosen.append((chosen_rule.function.__name__,
                               sorted((k, type(v).__name__, repr(v) if k != "data" else "")
                                      for k, v in values.items())))
        except StopTest:
            chosen.append("stopped")
        except InvalidDefinition:
            chosen.append("no valid rule")
    data.freeze()
    spans = [(s.label, s.start, s.end, s.depth, s.discarded) for s in data.spans]
    counts = {k: (v.satisfied, v.unsatisfied) for k, v in data._observability_predicates.items()}
    return chosen, data.choices, spans, sorted(data.events), counts, data.status


@settings(max_examples=150, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(machine_seed=st.integers(0, 2**32 - 1), rng_seed=st.integers(0, 2**32 - 1))
def test_rule_choice_draws_what_rule_strategy_draws(machine_seed: int, rng_seed: int) -> None:
    machine_type = _machine(random.Random(machine_seed))
    upstream = _drive(machine_type, RuleStrategy, rng_seed)
    assert _drive(machine_type, RuleChoice, rng_seed) == upstream


def test_the_comparison_sees_rejections_retries_and_counts() -> None:
    """The random machines reach what the comparison must cover: rules rejected by their
    precondition or swarm flag (a retry event), bundles, and precondition counts."""
    seen_events, seen_counts, seen_stops = False, False, False
    for machine_seed in range(40):
        chosen, _, _, events, counts, _ = _drive(_machine(random.Random(machine_seed)),
                                                 RuleChoice, machine_seed)
        seen_events |= any(e.startswith("Retried draw") for e in events)
        seen_counts |= any(unsatisfied for _, unsatisfied in counts.values())
        seen_stops |= "no valid rule" in chosen or "stopped" in chosen
    assert seen_events and seen_counts and seen_stops


def test_the_machines_draw_rules_with_rule_choice() -> None:
    """On the session's selected target (the test leaves the selection as it is)."""
    from properties.families.v0.machines.block_level import BlockLevelMachine

    assert type(BlockLevelMachine()._rules_strategy) is RuleChoice
