"""The SGLang family's generator: one Hypothesis machine over the core's ``OracleMachine``
(a scheduler's requests over one radix cache), and the replay of ``--xfails-file`` entries.
Against a target of another family (a plain ``pytest`` run selects the bundled v0 allocator)
it judges the bundled radix cache."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from models.families.sglang.ops import Arrive, Evict, Finish, Match, TreeConfig, Unlock
from properties.core.expected import replay_expected
from properties.core.machine import OracleMachine
from properties.core.plugin import ExpectedFailure
from properties.core.targets import load_target
from properties.families.sglang.family import REF
from properties.families.sglang.judge import Arrived, TreeJudge

TOKENS = st.lists(st.integers(0, 2), max_size=12).map(tuple)
NAMESPACES = st.sampled_from([None, None, "a"])
#: A finishing request passes prev_prefix_len=0 now and then (its whole value, the tree's
#: own matched slots included): the contract keeps identical slots, not duplicates.
PREV_ZERO = st.sampled_from([False, False, False, True])


class TreeMachine(OracleMachine):
    """Requests arrive (often sharing an earlier prompt, as a shared system prompt does),
    run, finish (some keeping a lock for their next turn), are unlocked; the cache is evicted
    and looked up between them."""

    judge: TreeJudge

    def __init__(self) -> None:
        super().__init__()
        if self.family.name != "sglang":
            self.target = load_target(family=REF)
            self.family = self.target.family_object
        self.running: list[int] = []
        self.held: list[int] = []
        self.prompts: list[tuple[tuple[int, ...], str | None]] = []

    @initialize(pages=st.integers(2, 10), page_size=st.sampled_from([1, 4]))
    def start(self, pages: int, page_size: int) -> None:
        self.setup(TreeConfig(pages, page_size))

    @rule(tokens=TOKENS, extra_key=NAMESPACES)
    def arrive(self, tokens: tuple[int, ...], extra_key: str | None) -> None:
        self._arrive(tokens, extra_key)

    @precondition(lambda self: bool(self.prompts))
    @rule(data=st.data(), suffix=TOKENS)
    def share(self, data: st.DataObject, suffix: tuple[int, ...]) -> None:
        """A request that starts with an earlier request's tokens, in its namespace."""
        tokens, extra_key = data.draw(st.sampled_from(self.prompts))
        self._arrive(tokens + suffix[:6], extra_key)

    @precondition(lambda self: bool(self.running))
    @rule(data=st.data(), hold=st.booleans(), prev_zero=PREV_ZERO)
    def finish(self, data: st.DataObject, hold: bool, prev_zero: bool) -> None:
        self._finish(data.draw(st.sampled_from(self.running)), hold, prev_zero)

    @rule(tokens=TOKENS, extra_key=NAMESPACES, hold=st.booleans())
    def prefill(self, tokens: tuple[int, ...], extra_key: str | None, hold: bool) -> None:
        """A request that arrives and is inserted at once."""
        req = self._arrive(tokens, extra_key)
        if req is not None:
            self._finish(req, hold, False)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def unlock(self, data: st.DataObject) -> None:
        req = data.draw(st.sampled_from(self.held))
        self.held.remove(req)
        self.do(Unlock(req))

    @rule(num_tokens=st.integers(0, 12))
    def evict(self, num_tokens: int) -> None:
        self.do(Evict(num_tokens))

    @rule(tokens=TOKENS, extra_key=NAMESPACES)
    def match(self, tokens: tuple[int, ...], extra_key: str | None) -> None:
        self.do(Match(tokens, extra_key))

    def _arrive(self, tokens: tuple[int, ...], extra_key: str | None) -> int | None:
        before = len(self.judge.log)
        self.do(Arrive(tokens, extra_key))
        outcome = self.judge.log[-1].outcome if len(self.judge.log) > before else None
        if isinstance(outcome, Arrived) and outcome.slots is not None:
            self.running.append(outcome.req)
            self.prompts.append((tokens, extra_key))
            return outcome.req
        return None

    def _finish(self, req: int, hold: bool, prev_zero: bool) -> None:
        self.running.remove(req)
        self.do(Finish(req, hold, prev_zero))
        request = self.judge.model.requests[req]
        if request is not None and request.state == "held":
            self.held.append(req)


TestRadixCache = TreeMachine.TestCase


def test_expected_failure(expected_failure: ExpectedFailure,
                          request: pytest.FixtureRequest) -> None:
    replay_expected(expected_failure, request.config)
