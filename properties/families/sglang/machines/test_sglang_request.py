"""The SGLang family's request level: requests admitted, prefilled in chunks (each chunk but a
prompt's last published by ``checkpoint``), decoded, preempted under memory pressure and
resumed, finished, as SGLang's scheduler drives the cache's request API
(:mod:`properties.families.sglang.requests`). Against a target without the request API
(upstream trees driven through the tree level only) every example is rejected."""

from __future__ import annotations

import unittest

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from models.families.sglang.ops import Evict, Match, TreeConfig
from models.families.sglang.requests import Running
from properties.core.expected import replay_expected
from properties.core.machine import OracleMachine
from properties.core.plugin import ExpectedFailure
from properties.core.selection import current_target
from properties.core.targets import load_target
from properties.families.sglang.family import REF
from properties.families.sglang.judge import TreeJudge
from properties.families.sglang.requests import (
    LIVE,
    Admit,
    Admitted,
    Chunk,
    Complete,
    Decode,
    Preempt,
    Resume,
)

#: Prompt tokens: few values, so that prompts share prefixes (and outputs meet prompts).
TOKEN = st.integers(0, 2)


class RequestMachine(OracleMachine):
    """Prompts of up to three pages (often an earlier request's tokens cut anywhere, then
    their own), chunks of one or two pages, decode steps, preemptions (mostly when an
    allocation was refused) and resumptions, finishes; evictions and lookups between them."""

    judge: TreeJudge

    def __init__(self) -> None:
        super().__init__()
        if self.family.name != "sglang":
            self.target = load_target(family=REF)
            self.family = self.target.family_object
        self.seen: list[tuple[tuple[int, ...], str | None]] = []

    @initialize(pages=st.integers(3, 12), page_size=st.sampled_from([1, 2]))
    def start(self, pages: int, page_size: int) -> None:
        self.setup(TreeConfig(pages, page_size))

    # ------------------------------------------------------------------ state

    def _requests(self, state: str) -> list[int]:
        return [i for i, r in enumerate(self.judge.model.requests)
                if isinstance(r, Running) and r.state == state]

    def _prefilling(self) -> list[int]:
        return [i for i in self._requests("running")
                if self.judge.model.requests[i].computed  # type: ignore[union-attr]
                < len(self.judge.model.requests[i].tokens)]  # type: ignore[union-attr]

    def _holding(self) -> list[int]:
        """Running requests holding KV (a matched prefix or a computed chunk)."""
        return [i for i in self._requests("running")
                if self.judge.model.requests[i].computed]  # type: ignore[union-attr]

    def _decoding(self) -> list[int]:
        return [i for i in self._requests("running") if i not in self._prefilling()]

    # ------------------------------------------------------------------ rules

    @precondition(lambda self: len(self._requests("running")) + len(self._requests("waiting"))
                  < LIVE)
    @rule(data=st.data(), extra_key=st.sampled_from([None, None, None, "a"]))
    def admit(self, data: st.DataObject, extra_key: str | None) -> None:
        """A new request: fresh tokens, or an earlier request's (prompt and outputs) cut
        anywhere and continued."""
        ps = self.config.page_size
        head: tuple[int, ...] = ()
        if bool(self.seen) and data.draw(st.booleans(), label="shares a prefix"):
            tokens, extra_key = data.draw(st.sampled_from(self.seen))
            head = tokens[:data.draw(st.integers(0, len(tokens)))]
        tail = tuple(data.draw(st.lists(TOKEN, min_size=0 if head else 1, max_size=3 * ps)))
        self.do(Admit((head + tail)[:4 * ps], extra_key))

    @precondition(lambda self: bool(self._prefilling()))
    @rule(data=st.data(), pages=st.sampled_from([1, 1, 2]), publish=st.booleans())
    def chunk(self, data: st.DataObject, pages: int, publish: bool) -> None:
        req = data.draw(st.sampled_from(self._prefilling()))
        request = self.judge.model.requests[req]
        assert isinstance(request, Running)
        left = len(request.tokens) - request.computed
        tokens = pages * self.config.page_size
        # A prompt's last chunk is not checkpointed by the scheduler (it finishes or decodes).
        self.do(Chunk(req, tokens, publish or tokens < left))
        self._note(req)

    @precondition(lambda self: bool(self._decoding()))
    @rule(data=st.data(), token=TOKEN)
    def decode(self, data: st.DataObject, token: int) -> None:
        req = data.draw(st.sampled_from(self._decoding()))
        self.do(Decode(req, token))
        self._note(req)

    @precondition(lambda self: bool(self._holding()))
    @rule(data=st.data())
    def preempt(self, data: st.DataObject) -> None:
        self.do(Preempt(data.draw(st.sampled_from(self._holding()))))

    @precondition(lambda self: bool(self._requests("waiting")))
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        before = len(self.judge.log)
        self.do(Resume(data.draw(st.sampled_from(self._requests("waiting")))))
        outcome = self.judge.log[-1].outcome if len(self.judge.log) > before else None
        assert outcome is None or isinstance(outcome, Admitted)

    @precondition(lambda self: bool(self._decoding()))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        self.do(Complete(data.draw(st.sampled_from(self._decoding()))))

    @rule(num_tokens=st.sampled_from([1, 2, 4]))
    def evict(self, num_tokens: int) -> None:
        self.do(Evict(num_tokens * self.config.page_size))

    @precondition(lambda self: bool(self.seen))
    @rule(data=st.data())
    def match(self, data: st.DataObject) -> None:
        self.do(Match(*data.draw(st.sampled_from(self.seen))))

    def _note(self, req: int) -> None:
        request = self.judge.model.requests[req]
        if isinstance(request, Running):
            self.seen.append((request.tokens[:request.computed], request.extra_key))
            del self.seen[:-8]


class TestRequestLevel(RequestMachine.TestCase):  # type: ignore[misc,valid-type]
    """The request machine against the selected target (FULL trees with the request API)."""

    def setUp(self) -> None:
        target = current_target()
        if target.family != "sglang":
            return  # the machine judges the bundled reference (see RequestMachine)
        if getattr(target.caps, "swa", False):
            raise unittest.SkipTest("the target is a FULL + SWA tree (the SWA level)")
        if not getattr(target.caps, "requests", False):
            raise unittest.SkipTest("the target's driver has no request API (tree level only)")


def test_expected_failure(expected_failure: ExpectedFailure,
                          request: pytest.FixtureRequest) -> None:
    replay_expected(expected_failure, request.config)
