"""The SGLang family's FULL + SWA level: a Hypothesis machine over a tree with a sliding
window (:class:`~properties.families.sglang.swa_judge.SWATreeJudge`), for the targets that are
FULL + SWA trees (``TreeTarget.swa``); others skip it, as SWA targets skip the FULL level.
Driven directly (a fuzz harness) with another target, it judges the bundled SWA tree.

It draws where SWA bugs show: prompts longer than the window, an SWA pool smaller than the
full one (pressure on the SWA pool alone), SWA eviction while requests hold locks (their
windows must survive, the rest of their paths may be tombstoned), full eviction over
tombstoned leaves, requests that re-insert a prefix whose SWA KV was dropped, and
requests that finish with ``prev_prefix_len=0`` (their whole value, matched slots included);
beside them, misuse probes on fresh trees
(:data:`~properties.families.sglang.slots.SWA_MISUSES`)."""

from __future__ import annotations

import unittest

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from models.families.sglang.ops import Evict, Match, ReleaseWindow, TreeConfig
from properties.core.selection import current_target
from properties.core.targets import load_target
from properties.families.sglang import slots
from properties.families.sglang.family import REF
from properties.families.sglang.machines.requests import TOKEN, RequestRules
from properties.families.sglang.swa_judge import SWATreeJudge
from properties.families.sglang.targets import BUNDLED_SWA_SPEC


def is_swa(target: object) -> bool:
    """Whether ``target`` is a FULL + SWA tree (the SWA level judges it, the FULL one not)."""
    return bool(getattr(getattr(target, "caps", None), "swa", False))


class SWAMachine(RequestRules):
    """Requests over a FULL + SWA tree (the shared request rules of
    :class:`~properties.families.sglang.machines.requests.RequestRules`); windows released
    early, full and SWA evictions and lookups between them."""

    judge: SWATreeJudge

    def __init__(self) -> None:
        super().__init__()
        if not is_swa(self.target):  # driven directly (a fuzz harness): the bundled SWA tree
            self.target = load_target(BUNDLED_SWA_SPEC, family=REF)
            self.family = self.target.family_object

    @initialize(pages=st.integers(3, 12), window=st.integers(1, 3), data=st.data())
    def start(self, pages: int, window: int, data: st.DataObject) -> None:
        swa_pages = data.draw(st.integers(2, pages), label="swa_pages")
        self.setup(TreeConfig(pages, 1, window, swa_pages))

    def tokens(self, data: st.DataObject) -> tuple[int, ...]:
        """Up to seven tokens: longer than the window."""
        return tuple(data.draw(st.lists(TOKEN, max_size=7)))

    @precondition(lambda self: any(self._windowed()))
    @rule(data=st.data())
    def release_window(self, data: st.DataObject) -> None:
        """A running or held request decodes past the window: its lock's SWA part goes (its
        full lock stays), so SWA eviction may tombstone that window under a full lock."""
        self.do(ReleaseWindow(data.draw(st.sampled_from(list(self._windowed())))))

    def _windowed(self) -> list[int]:
        reqs = self.judge.model.requests
        return [i for i in self.running + self.held
                if (r := reqs[i]) is not None and r.node is not None and not r.swa_released]

    @rule(num_tokens=st.sampled_from([0, 0, 1, 2, 4]), swa=st.sampled_from([0, 1, 2, 3, 8]))
    def evict(self, num_tokens: int, swa: int) -> None:
        """Mostly SWA eviction (tombstones), sometimes full eviction with it."""
        self.do(Evict(num_tokens, swa))

    @rule(probe=st.builds(slots.Probe, st.sampled_from(slots.SWA_MISUSES), st.integers(0, 3)))
    def misuse(self, probe: slots.Probe) -> None:
        """A misuse on a fresh FULL + SWA tree of the target (never the run's own): a robustness
        finding when it changes state, a violation only for a target claiming typed errors."""
        self.do(probe)

    @precondition(lambda self: bool(self.prompts))
    @rule(data=st.data())
    def match(self, data: st.DataObject) -> None:
        tokens, extra_key = data.draw(st.sampled_from(self.prompts))
        self.do(Match(tokens[:data.draw(st.integers(0, len(tokens)))], extra_key))


class SWALevelTest:
    """Mixin for the machine's ``TestCase``: skipped for a target that is not FULL + SWA."""

    def setUp(self) -> None:
        if not is_swa(current_target()):
            raise unittest.SkipTest("the target is not a FULL + SWA tree")


class TestSwaRadixCache(SWALevelTest, SWAMachine.TestCase):  # type: ignore[misc,valid-type]
    """The FULL + SWA machine against the selected target."""
