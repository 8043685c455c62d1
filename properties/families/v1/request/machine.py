"""Hypothesis state machine: requests as vLLM's scheduler drives a ``KVCacheManager``.

Prompts are drawn from a three-token alphabet and often extend another request's prompt, with
an occasional cache salt or LoRA adapter, so prefix hits across requests (and near misses that
differ in one key input) are frequent. The pool is small, so chunked prefill, decode with
lookahead and new requests compete for blocks: ``allocate_slots`` returns ``None`` often and
the machine then preempts, as the scheduler does (the last running request, or, as a
priority scheduler may, one it already scheduled in this step). Steps end with the scheduled
tokens computed and the next outputs sampled (and the stats logged: ``usage``, the prefix cache
stats, the computed blocks' ids, the cached tokens of each request's first output; with events
on, the step's KV events taken); requests finish when their outputs run out, or are aborted
between steps; ``reset_prefix_cache`` comes between steps. Where the release has them, the
scheduler's queries come where it asks them: ``get_num_cached_tokens`` of the waiting requests
before a step (0.34), ``get_num_common_prefix_blocks`` in a step (0.33); between steps a
KV connector's failed load makes the scheduler evict a running request's blocks
(``evict_blocks``).

The machine is the core's :class:`~properties.core.machine.OracleMachine`: every operation
goes through the family's judge (:class:`~properties.families.v1.request.family.ManagerJudge`)
with :meth:`do`, so ``--all`` absorption, expected failures, signatures, shrinking and
reproducers are the core's. One machine class per manager configuration (:func:`bind`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from models.families.v1 import request_ops as ops
from properties.core.machine import OracleMachine
from properties.families.v1.request.executor import RequestExecutor
from properties.families.v1.request.family import ManagerJudge
from properties.families.v1.request.target import ManagerConfig

MAX_REQUESTS = 7
CHUNKS = (1, 1, 2, 3, 4, 5, 8, 16)
#: Generator features a run may leave out (an xfails entry's ``avoid``), so a run with a known
#: deviation there still explores the rest: ``preempt_scheduled``, preempting a request
#: already scheduled in the open step (as a priority scheduler may; FCFS never does);
#: ``duplicate_events``, taking events once the pool has held one key on two blocks (a copy:
#: vLLM's pool removes a key per copy, the deviation ``manager-removed-per-copy``), so the
#: example goes on without its events judged rather than ending at that deviation.
AVOIDABLE = frozenset({"preempt_scheduled", "duplicate_events"})


class ManagerMachine(OracleMachine):
    """Bind :attr:`manager_config` in a subclass (:func:`bind`); :attr:`avoid` is set per run
    (the session's xfails entries' ``avoid``)."""

    manager_config: ClassVar[ManagerConfig]
    avoid: ClassVar[frozenset[str]] = frozenset()
    judge: ManagerJudge

    @initialize()
    def start(self) -> None:
        self.setup(self.manager_config)

    @property
    def ex(self) -> RequestExecutor:
        return self.judge.executor

    def run(self, op: ops.ROp) -> tuple[bool, Any]:
        """:meth:`do` ``op``: whether it ran (not absorbed as an expected failure or skipped)
        and what it returned."""
        log = self.judge.log
        before = len(log)
        self.do(op)
        if len(log) == before:
            return False, None
        return True, log[-1].outcome

    def _open(self) -> list[int]:
        return [i for i, r in enumerate(self.ex.reqs)
                if r.status != "finished" and r.scheduled is None]

    def _running(self) -> list[int]:
        """Preemptible requests (without ``preempt_scheduled``: not scheduled in this step,
        as an FCFS scheduler preempts)."""
        same_step = "preempt_scheduled" not in self.avoid
        return [i for i, r in enumerate(self.ex.reqs)
                if r.status == "running" and (same_step or r.scheduled is None)]

    @precondition(lambda self: len(self.ex.reqs) < MAX_REQUESTS)
    @rule(data=st.data())
    def add_request(self, data: st.DataObject) -> None:
        """A fresh prompt, one extending a prefix of another request's tokens, or an exact
        whole-block copy of one (same key inputs: the prompt is entirely cached)."""
        reqs = self.ex.reqs
        kind = data.draw(st.sampled_from(["fresh", "extend", "extend", "copy"] if reqs
                                         else ["fresh"]), label="kind")
        base: list[int] = []
        salt = data.draw(st.sampled_from([None, None, None, "s"]), label="salt")
        lora = data.draw(st.sampled_from([None, None, None, 1]), label="lora")
        size = data.draw(st.sampled_from([1, 1, 2, 3, 4, 6, 10]), label="tail size")
        if kind != "fresh":
            other = reqs[data.draw(st.integers(0, len(reqs) - 1), label="base")]
            cut = data.draw(st.integers(0, len(other.tokens)), label="prefix")
            if kind == "copy" or data.draw(st.booleans(), label="aligned"):
                cut -= cut % max(self.manager_config.block_sizes)  # whole blocks: exact hits
            base = list(other.tokens[:cut])
            if kind == "copy" and base:
                size, salt, lora = 0, other.salt, other.lora
        tail = data.draw(st.lists(st.integers(0, 2), min_size=size, max_size=size),
                         label="tail")
        prompt = tuple((base + tail)[:20])
        outputs = tuple(data.draw(st.lists(st.integers(0, 2), max_size=5), label="outputs"))
        self.do(ops.Add(prompt, outputs, salt, lora))

    @precondition(lambda self: self._open())
    @rule(data=st.data(), n=st.sampled_from(CHUNKS), lookahead=st.sampled_from([0, 0, 0, 1, 3]))
    def schedule(self, data: st.DataObject, n: int, lookahead: int) -> None:
        i = data.draw(st.sampled_from(self._open()), label="req")
        self.do(ops.Schedule(i, n, lookahead))

    @precondition(lambda self: not self.ex.step_open and self._open())
    @rule(data=st.data(), lookahead=st.sampled_from([0, 0, 1]))
    def engine_step(self, data: st.DataObject, lookahead: int) -> None:
        """One whole step as vLLM's FCFS scheduler makes it: running requests first (on
        ``None``, preempt the last running request not yet scheduled, else the request
        itself, and retry), then waiting ones until one does not fit; then the step ends."""
        ex = self.ex
        order = [i for i, r in enumerate(ex.reqs) if r.status == "running"]
        order += [i for i, r in enumerate(ex.reqs) if r.status in ("waiting", "preempted")]
        for i in order:
            r = ex.reqs[i]
            if r.status == "finished" or r.scheduled is not None:
                continue
            was_running = r.status == "running"
            n = data.draw(st.sampled_from(CHUNKS), label="chunk")
            while True:
                ran, out = self.run(ops.Schedule(i, n, lookahead))
                if not ran:
                    return  # absorbed: the example is over
                if out is not None or r.status != "running":
                    break
                victims = [j for j, q in enumerate(ex.reqs)
                           if q.status == "running" and q.scheduled is None and j != i]
                if not self.run(ops.Preempt(victims[-1] if victims else i))[0]:
                    return
            if not was_running and r.scheduled is None:
                break
        if ex.step_open:
            self._close_step()

    @precondition(lambda self: self.ex.step_open)
    @rule()
    def end_step(self) -> None:
        self._close_step()

    def _close_step(self) -> None:
        """The step ends; with events on, the scheduler then takes the manager's events (once
        per step, as it publishes them; with ``duplicate_events`` avoided, only until the pool
        first holds a key on two blocks)."""
        if self.run(ops.EndStep())[0] and self.manager_config.events and not (
                "duplicate_events" in self.avoid and self.ex.duplicated):
            self.do(ops.TakeEvents())

    @precondition(lambda self: self._running())
    @rule(data=st.data())
    def preempt(self, data: st.DataObject) -> None:
        running = self._running()
        i = data.draw(st.sampled_from([running[-1], *running]), label="req")
        self.do(ops.Preempt(i))

    @precondition(lambda self: not self.ex.step_open and self.ex.supports(
        "get_num_cached_tokens") and self._fresh_waiting())
    @rule()
    def cache_aware_order(self) -> None:
        """0.34's cache-aware ordering before a step: ``get_num_cached_tokens`` of each waiting
        request that has computed nothing yet (the scheduler sorts them by it when two or more
        wait; the machine asks with one too: the answer must not depend on who else waits)."""
        for i in self._fresh_waiting():
            if not self.run(ops.CachedTokens(i))[0]:
                return

    def _fresh_waiting(self) -> list[int]:
        return [i for i, r in enumerate(self.ex.reqs) if r.status == "waiting"]

    @precondition(lambda self: self.ex.step_open and self.ex.supports(
        "get_num_common_prefix_blocks") and any(r.live for r in self.ex.reqs))
    @rule(data=st.data())
    def common_prefix(self, data: st.DataObject) -> None:
        """0.33's ``get_num_common_prefix_blocks`` of a running request, in a step (as a
        scheduler that plans cascade attention asks)."""
        live = [i for i, r in enumerate(self.ex.reqs) if r.live]
        self.do(ops.CommonPrefix(data.draw(st.sampled_from(live), label="req")))

    @precondition(lambda self: not self.ex.step_open)
    @rule(data=st.data(), action=st.sampled_from(["abort", "abort", "abort", "reset"]))
    def between_steps(self, data: st.DataObject, action: str) -> None:
        """An abort (of any unfinished request) or, less often, ``reset_prefix_cache``."""
        live = [i for i, r in enumerate(self.ex.reqs) if r.status != "finished"]
        if action == "abort" and live:
            self.do(ops.Abort(data.draw(st.sampled_from(live), label="req")))
        elif action == "reset":
            self.do(ops.ResetCache())

    @precondition(lambda self: not self.ex.step_open and any(r.live for r in self.ex.reqs))
    @rule(data=st.data())
    def failed_load(self, data: st.DataObject) -> None:
        """A KV connector's failed load of a running request's blocks from some block on,
        between steps: the scheduler evicts them from the prefix cache. A rule of its own, so
        that swarm testing's per-example rule choice keeps it as often as the others."""
        running = [i for i, r in enumerate(self.ex.reqs) if r.live]
        i = data.draw(st.sampled_from(running), label="req")
        self.do(ops.Evict(i, data.draw(st.sampled_from([0, 1, 1, 2]), label="start")))


def bind(config: ManagerConfig, name: str = "ManagerMachine") -> type[ManagerMachine]:
    """The machine over the session's target with the manager configuration ``config``."""
    return type(name, (ManagerMachine,), {"manager_config": config,
                                          "__module__": ManagerMachine.__module__})


def checked_avoid(avoid: Iterable[str]) -> frozenset[str]:
    """``avoid`` (the session's, :func:`properties.core.plugin.avoided`) as a set; a name not in
    :data:`AVOIDABLE` is a ``ValueError``."""
    names = frozenset(avoid)
    if names - AVOIDABLE:
        raise ValueError(f"unknown features to avoid: {sorted(names - AVOIDABLE)}")
    return names
