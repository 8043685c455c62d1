"""The toy family's generator: one Hypothesis machine over the core's ``OracleMachine``, and
the replay of ``--xfails-file`` entries. Against a target of another family (a plain ``pytest``
run selects the bundled v0 allocator) it judges the bundled toy cache."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from properties.core.expected import replay_expected
from properties.core.machine import OracleMachine
from properties.core.plugin import ExpectedFailure
from properties.core.targets import load_target
from tests.toy.family import REF
from tests.toy.model import Allocate, Free, Lookup, ToyConfig

TOKENS = st.lists(st.integers(0, 2), max_size=8).map(tuple)


class ToyMachine(OracleMachine):
    """Requests arrive (often sharing a prefix with an earlier one, as a shared system prompt
    does), finish and are looked up."""

    def __init__(self) -> None:
        super().__init__()
        if self.family.name != "toy":
            self.target = load_target(family=REF)
            self.family = self.target.family_object
        self.live: list[int] = []
        self.made = 0
        self.prompts: list[tuple[int, ...]] = []

    @initialize(num_blocks=st.integers(1, 6), block_size=st.integers(1, 3))
    def start(self, num_blocks: int, block_size: int) -> None:
        self.setup(ToyConfig(num_blocks, block_size))

    @rule(tokens=TOKENS)
    def allocate(self, tokens: tuple[int, ...]) -> None:
        before = len(self.judge.log)
        self.do(Allocate(tokens))
        if len(self.judge.log) > before and isinstance(self.judge.log[-1].outcome, list):
            self.live.append(self.made)  # a refused allocation made no request
            self.made += 1
            self.prompts.append(tokens)

    @precondition(lambda self: bool(self.prompts))
    @rule(data=st.data(), suffix=TOKENS)
    def share(self, data: st.DataObject, suffix: tuple[int, ...]) -> None:
        """A request that starts with an earlier request's tokens."""
        prompt = data.draw(st.sampled_from(self.prompts))
        self.allocate(prompt + suffix[:2])

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        req = data.draw(st.sampled_from(self.live))
        self.live.remove(req)
        self.do(Free(req))

    @rule(tokens=TOKENS)
    def lookup(self, tokens: tuple[int, ...]) -> None:
        self.do(Lookup(tokens))


TestToy = ToyMachine.TestCase


def test_expected_failure(expected_failure: ExpectedFailure,
                          request: pytest.FixtureRequest) -> None:
    replay_expected(expected_failure, request.config)
