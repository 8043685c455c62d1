"""The offload family's generator: one Hypothesis machine over the core's ``OracleMachine``
driving the tier as vLLM's offloading connector does, and the replay of ``--xfails-file``
entries. Against a target of another family (a plain ``pytest`` run selects the default
family's allocator) it judges the bundled manager.

The scheduler side and the workers interleave: requests arrive (with or without key
positions), look keys up, offer keys for storing and load HIT keys back; the workers complete
stores (or fail them) and loads out of order, also after their request finished; requests
finish; the cache is reset between a prepare and its completion, and the workers flush later;
small tiers force evictions in the middle of an offer; rarely, a call the tier must refuse (a
load of keys that are not HIT, a completion of a load nothing started, an offer naming a key
twice).
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from models.families.offload import ops as o
from properties.core.expected import replay_expected
from properties.core.machine import OracleMachine
from properties.core.plugin import ExpectedFailure
from properties.core.targets import load_target
from properties.families.offload.adapter import StoreOut
from properties.families.offload.family import REF
from properties.families.offload.judge import OffloadJudge

KEYS = st.lists(st.integers(0, o.NUM_KEYS - 1), min_size=1, max_size=4, unique=True).map(tuple)


class OffloadMachine(OracleMachine):
    """See the module docstring."""

    judge: OffloadJudge

    def __init__(self) -> None:
        super().__init__()
        if self.family.name != "offload":
            self.target = load_target(family=REF)
            self.family = self.target.family_object
        self.live: list[int] = []
        self.made = 0

    @initialize(num_chunks=st.integers(1, 4), threshold=st.sampled_from([1, 1, 1, 2, 3]),
                tracker=st.sampled_from([2, 3, 64_000]), events=st.sampled_from([True, True,
                                                                                 False]))
    def start(self, num_chunks: int, threshold: int, tracker: int, events: bool) -> None:
        if not self.target.caps.caps.store_threshold:
            threshold, tracker = 1, 64_000
        self.setup(o.OffloadConfig(num_chunks, threshold, tracker, events))

    # ------------------------------------------------------------------ scheduler

    @rule(positions=st.sampled_from([True, True, True, False]), go=st.integers(0, 3))
    def new_request(self, positions: bool, go: int) -> None:
        if len(self.live) >= 2 and go:  # a few requests run at once
            return
        self.do(o.NewRequest(self.made, positions))
        self.live.append(self.made)
        self.made += 1

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data(), key=st.integers(0, o.NUM_KEYS - 1))
    def lookup(self, data: st.DataObject, key: int) -> None:
        self.do(o.Lookup(data.draw(st.sampled_from(self.live)), key))

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data(), keys=KEYS, now=st.sampled_from([True, True, False]))
    def store(self, data: st.DataObject, keys: tuple[int, ...], now: bool) -> None:
        """A request offers keys; ``now``: the workers write them at once."""
        req = data.draw(st.sampled_from(self.live))
        self.do(o.PrepareStore(req, keys))
        out = self.judge.log[-1].outcome if self.judge.log else None
        if now and isinstance(out, StoreOut) and out.to_store:
            self.do(o.CompleteStore(req, out.to_store, True))

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data(), now=st.sampled_from([True, False]))
    def load(self, data: st.DataObject, now: bool) -> None:
        """A request loads HIT keys back; ``now``: the transfer completes at once."""
        hits = sorted(self.judge.model.served())
        if not hits:
            return
        req = data.draw(st.sampled_from(self.live))
        keys = tuple(data.draw(st.lists(st.sampled_from(hits), min_size=1, max_size=3,
                                        unique=True)))
        self.do(o.PrepareLoad(req, keys))
        if now:
            self.do(o.CompleteLoad(req, keys))

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data(), go=st.integers(0, 1))
    def finish(self, data: st.DataObject, go: int) -> None:
        if go:  # requests live across several offers and loads
            return
        req = data.draw(st.sampled_from(self.live))
        self.live.remove(req)
        self.do(o.Finish(req))

    @precondition(lambda self: bool(self.judge.model.served()))
    @rule(data=st.data())
    def reuse(self, data: st.DataObject) -> None:
        """A short request hits keys others stored: it loads them and finishes (the reuse an
        LRU commits as recency and ARC as a promotion to T2)."""
        hits = sorted(self.judge.model.served())
        keys = tuple(data.draw(st.lists(st.sampled_from(hits), min_size=1, max_size=2,
                                        unique=True)))
        req = self._arrive()
        self.do(o.PrepareLoad(req, keys))
        self.do(o.CompleteLoad(req, keys))
        self.live.remove(req)
        self.do(o.Finish(req))

    @rule(keys=KEYS, stay=st.booleans())
    def offer(self, keys: tuple[int, ...], stay: bool) -> None:
        """A new request offers keys and the workers write them; it finishes at once unless
        ``stay`` (then it commits its recency later, among others'): under a small tier, the
        pressure that makes the policy pick victims."""
        req = self._arrive()
        self.do(o.PrepareStore(req, keys))
        out = self.judge.log[-1].outcome if self.judge.log else None
        if isinstance(out, StoreOut) and out.to_store:
            self.do(o.CompleteStore(req, out.to_store, True))
        if not stay or len(self.live) > 3:
            self.live.remove(req)
            self.do(o.Finish(req))

    def _arrive(self) -> int:
        req = self.made
        self.do(o.NewRequest(req, True))
        self.live.append(req)
        self.made += 1
        return req

    @precondition(lambda self: self.target.caps.caps.reset_cache)
    @rule(go=st.integers(0, 7))
    def reset(self, go: int) -> None:
        if not go:  # rare: a reset empties the tier
            self.do(o.Reset())

    @rule(go=st.integers(0, 2))
    def take_events(self, go: int) -> None:
        if not go:
            self.do(o.TakeEvents())

    @precondition(lambda self: bool(self.live) and self.target.caps.caps.req_context)
    @rule(data=st.data(), kind=st.integers(0, 11), keys=KEYS)
    def misuse(self, data: st.DataObject, kind: int, keys: tuple[int, ...]) -> None:
        """Rarely, a call the tier must refuse, changing nothing: loading keys that are not
        HIT, completing a load nothing started, an offer naming a key twice; or one it may
        refuse or ignore but that changes nothing: completing a store again (keys already
        written, or never offered)."""
        if kind > 3:
            return
        req = data.draw(st.sampled_from(self.live))
        if kind == 0:
            self.do(o.PrepareLoad(req, keys))
        elif kind == 1:
            self.do(o.CompleteLoad(req, keys))
        elif kind == 2:
            self.do(o.PrepareStore(req, (*keys, keys[0])))
        else:  # most often of keys already written: a worker reporting a store twice
            written = sorted(self.judge.model.served())
            if written and data.draw(st.integers(0, 3)) > 0:
                keys = tuple(data.draw(st.lists(st.sampled_from(written), min_size=1,
                                                max_size=2, unique=True)))
            self.do(o.CompleteStore(req, keys, data.draw(st.booleans())))

    # ------------------------------------------------------------------ workers

    @precondition(lambda self: bool(self.judge.model.stores))
    @rule(data=st.data(), success=st.sampled_from([True, True, False]))
    def complete_store(self, data: st.DataObject, success: bool) -> None:
        job = data.draw(st.sampled_from(self.judge.model.stores))
        self.do(o.CompleteStore(job.req, job.keys, success))

    @precondition(lambda self: bool(self.judge.model.load_jobs))
    @rule(data=st.data())
    def complete_load(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self.judge.model.load_jobs))
        self.do(o.CompleteLoad(job.req, job.keys))

    @precondition(lambda self: bool(self.judge.model.quarantined))
    @rule()
    def flushed(self) -> None:
        self.do(o.Flushed())


TestOffload = OffloadMachine.TestCase


def test_expected_failure(expected_failure: ExpectedFailure,
                          request: pytest.FixtureRequest) -> None:
    replay_expected(expected_failure, request.config)
