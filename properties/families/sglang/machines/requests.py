"""The request rules both SGLang machines share (the FULL level, ``test_sglang.py``, and the
FULL + SWA level, ``test_sglang_swa.py``): requests arrive (often sharing a prefix of an
earlier prompt, or repeating one), finish (some keeping a lock for their next turn, some
passing ``prev_prefix_len=0``) and are unlocked. A level adds its own rules and draws its
own prompts (:meth:`RequestRules.tokens`)."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from models.families.sglang.ops import Arrive, Finish, Unlock
from properties.core.machine import OracleMachine
from properties.families.sglang.judge import Arrived, TreeJudge

TOKEN = st.integers(0, 2)
NAMESPACES = st.sampled_from([None, None, "a"])
#: A finishing request passes prev_prefix_len=0 now and then (its whole value, the tree's
#: own matched slots included): the contract keeps identical slots, not duplicates.
PREV_ZERO = st.sampled_from([False, False, False, True])


class RequestRules(OracleMachine):
    """The shared rules (see the module docstring); ``running``, ``held`` and ``prompts`` are
    the machine's record of the requests the judge accepted."""

    judge: TreeJudge

    def __init__(self) -> None:
        super().__init__()
        self.running: list[int] = []
        self.held: list[int] = []
        self.prompts: list[tuple[tuple[int, ...], str | None]] = []

    def tokens(self, data: st.DataObject) -> tuple[int, ...]:
        """A prompt's own tokens (the level's lengths)."""
        raise NotImplementedError

    @rule(data=st.data(), extra_key=NAMESPACES)
    def arrive(self, data: st.DataObject, extra_key: str | None) -> None:
        self._arrive(self.tokens(data), extra_key)

    @precondition(lambda self: bool(self.prompts))
    @rule(data=st.data())
    def share(self, data: st.DataObject) -> None:
        """A request that shares a prefix (cut anywhere, mid-page too) of an earlier
        request's tokens, in its namespace, then goes its own way."""
        tokens, extra_key = data.draw(st.sampled_from(self.prompts))
        cut = data.draw(st.integers(0, len(tokens)))
        self._arrive(tokens[:cut] + self.tokens(data), extra_key)

    @precondition(lambda self: bool(self.prompts))
    @rule(data=st.data())
    def repeat(self, data: st.DataObject) -> None:
        """The same prompt again (a retry, a popular prompt), often while the first runs;
        after an SWA eviction, a re-insert over tombstones."""
        self._arrive(*data.draw(st.sampled_from(self.prompts)))

    @precondition(lambda self: bool(self.running))
    @rule(data=st.data(), hold=st.booleans(), prev_zero=PREV_ZERO)
    def finish(self, data: st.DataObject, hold: bool, prev_zero: bool) -> None:
        self._finish(data.draw(st.sampled_from(self.running)), hold, prev_zero)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def unlock(self, data: st.DataObject) -> None:
        req = data.draw(st.sampled_from(self.held))
        self.held.remove(req)
        self.do(Unlock(req))

    def _arrive(self, tokens: tuple[int, ...], extra_key: str | None) -> int | None:
        """Schedule a request; its number when the judge accepted it, else None."""
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
