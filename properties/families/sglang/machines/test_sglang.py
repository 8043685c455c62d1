"""The SGLang family's generator: one Hypothesis machine over the core's ``OracleMachine``
(a scheduler's requests over one radix cache), and the replay of ``--xfails-file`` entries.
Against a target of another family (a plain ``pytest`` run selects the bundled v0 allocator)
it judges the bundled radix cache."""

from __future__ import annotations

import unittest

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from models.families.sglang.ops import Evict, Match, TreeConfig
from properties.core.expected import replay_expected
from properties.core.plugin import ExpectedFailure
from properties.core.selection import current_target
from properties.core.targets import load_target
from properties.families.sglang import slots
from properties.families.sglang.family import REF
from properties.families.sglang.judge import TreeJudge
from properties.families.sglang.machines.requests import NAMESPACES, TOKEN, RequestRules


class TreeMachine(RequestRules):
    """Requests arrive (often sharing an earlier prompt, as a shared system prompt does),
    run, finish (some keeping a lock for their next turn), are unlocked; the cache is evicted
    and looked up between them. Beside them, the allocator level
    (:mod:`properties.families.sglang.slots`): bare allocations taken and given back, and
    misuse probes on fresh trees."""

    judge: TreeJudge

    def __init__(self) -> None:
        super().__init__()
        if self.family.name != "sglang":
            self.target = load_target(family=REF)
            self.family = self.target.family_object
        self.holds: list[int] = []

    @initialize(pages=st.integers(2, 16), page_size=st.sampled_from([1, 4]))
    def start(self, pages: int, page_size: int) -> None:
        self.setup(TreeConfig(pages, page_size))

    def tokens(self, data: st.DataObject) -> tuple[int, ...]:
        """Up to three pages (six tokens at page size 1), so that a pool holds several
        prompts and eviction has leaves to choose between."""
        size = 6 if self.config.page_size == 1 else 3 * self.config.page_size
        return tuple(data.draw(st.lists(TOKEN, max_size=size)))

    @rule(data=st.data(), extra_key=NAMESPACES, hold=st.booleans())
    def prefill(self, data: st.DataObject, extra_key: str | None, hold: bool) -> None:
        """A request that arrives and is inserted at once."""
        req = self._arrive(self.tokens(data), extra_key)
        if req is not None:
            self._finish(req, hold, False)

    @rule(num_tokens=st.sampled_from([0, 1, 1, 1, 2, 4, 8]))
    def evict(self, num_tokens: int) -> None:
        """Mostly one leaf's worth (the least recently used one, then), sometimes more."""
        self.do(Evict(num_tokens))

    @precondition(lambda self: bool(self.prompts))
    @rule(data=st.data())
    def revisit(self, data: st.DataObject) -> None:
        """A lookup of a whole earlier prompt: it refreshes that path's LRU time."""
        self.do(Match(*data.draw(st.sampled_from(self.prompts))))

    @rule(data=st.data())
    def match(self, data: st.DataObject) -> None:
        """A lookup, mostly of a prompt seen before (or a prefix of one)."""
        seen = data.draw(st.booleans()) if self.prompts else False
        if seen:
            tokens, extra_key = data.draw(st.sampled_from(self.prompts))
            if data.draw(st.booleans()):  # a prefix of it; else the whole prompt
                tokens = tokens[:data.draw(st.integers(0, len(tokens)))]
        else:
            tokens, extra_key = self.tokens(data), data.draw(NAMESPACES)
        self.do(Match(tokens, extra_key))

    @rule(data=st.data())
    def allocator(self, data: st.DataObject) -> None:
        """The allocator level, one rule: a bare allocation (the pool shrinks under the
        requests), its KV row extended (paged), its slots given back, or a misuse probe on a
        fresh tree."""
        op = slots.draw(data, self.holds, bool(getattr(self.judge.tree, "extends", False)))
        if isinstance(op, slots.Give):
            self.holds.remove(op.hold)
        before = len(self.judge.log)
        self.do(op)
        outcome = self.judge.log[-1].outcome if len(self.judge.log) > before else None
        if isinstance(op, slots.Take) and isinstance(outcome, int):
            self.holds.append(outcome)


class FullLevelTest:
    """Mixin for the machine's ``TestCase``: skipped for a FULL + SWA tree (its own level,
    ``test_sglang_swa.py``, judges it)."""

    def setUp(self) -> None:
        target = current_target()
        if target.family == "sglang" and getattr(target.caps, "swa", False):
            raise unittest.SkipTest("the target is a FULL + SWA tree (the SWA level)")
        if target.family == "sglang" and not getattr(target.caps, "tree", True):
            raise unittest.SkipTest("the target is judged at the request level only")


class TestRadixCache(FullLevelTest, TreeMachine.TestCase):  # type: ignore[misc,valid-type]
    """The FULL machine against the selected target."""


def test_expected_failure(expected_failure: ExpectedFailure,
                          request: pytest.FixtureRequest) -> None:
    replay_expected(expected_failure, request.config)
