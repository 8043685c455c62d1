"""Hypothesis state machine: requests as vLLM's scheduler drives a ``KVCacheManager``.

Prompts are drawn from a three-token alphabet and often extend another request's prompt, with
an occasional cache salt or LoRA adapter, so prefix hits across requests (and near misses that
differ in one key input) are frequent. The pool is small, so chunked prefill, decode with
lookahead and new requests compete for blocks: ``allocate_slots`` returns ``None`` often and
the machine then preempts, as the scheduler does (the last running request, or, as a
priority scheduler may, one it already scheduled in this step). Steps end with the scheduled
tokens computed and the next outputs sampled; requests finish when their outputs run out, or
are aborted between steps; ``reset_prefix_cache`` comes between steps. Every operation is
checked by :class:`~properties.families.v1.request.executor.RequestExecutor`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from models.families.v1 import request_ops as ops
from properties.families.v1.request.executor import RequestExecutor
from properties.families.v1.request.target import ManagerConfig, ManagerTarget

MAX_REQUESTS = 7
CHUNKS = (1, 1, 2, 3, 4, 5, 8, 16)


class ManagerMachine(RuleBasedStateMachine):
    """Bind :attr:`target` and :attr:`config` in a subclass (:func:`bind`)."""

    target: ClassVar[ManagerTarget]
    config: ClassVar[ManagerConfig]
    avoid: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.ex = RequestExecutor(self.target, self.config)

    @initialize()
    def start(self) -> None:
        self.ex.check()

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
                cut -= cut % max(self.config.block_sizes)  # whole blocks: exact hits
            base = list(other.tokens[:cut])
            if kind == "copy" and base:
                size, salt, lora = 0, other.salt, other.lora
        tail = data.draw(st.lists(st.integers(0, 2), min_size=size, max_size=size),
                         label="tail")
        prompt = tuple((base + tail)[:20])
        outputs = tuple(data.draw(st.lists(st.integers(0, 2), max_size=5), label="outputs"))
        self.ex.step(ops.Add(prompt, outputs, salt, lora))

    @precondition(lambda self: self._open())
    @rule(data=st.data(), n=st.sampled_from(CHUNKS), lookahead=st.sampled_from([0, 0, 0, 1, 3]))
    def schedule(self, data: st.DataObject, n: int, lookahead: int) -> None:
        i = data.draw(st.sampled_from(self._open()), label="req")
        self.ex.step(ops.Schedule(i, n, lookahead))

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
            while ex.step(ops.Schedule(i, n, lookahead)) is None and r.status == "running":
                victims = [j for j, q in enumerate(ex.reqs)
                           if q.status == "running" and q.scheduled is None and j != i]
                ex.step(ops.Preempt(victims[-1] if victims else i))
            if not was_running and r.scheduled is None:
                break
        if ex.step_open:
            ex.step(ops.EndStep())

    @precondition(lambda self: self.ex.step_open)
    @rule()
    def end_step(self) -> None:
        self.ex.step(ops.EndStep())

    @precondition(lambda self: self._running())
    @rule(data=st.data())
    def preempt(self, data: st.DataObject) -> None:
        running = self._running()
        i = data.draw(st.sampled_from([running[-1], *running]), label="req")
        self.ex.step(ops.Preempt(i))

    @precondition(lambda self: not self.ex.step_open)
    @rule(data=st.data(), action=st.sampled_from(["abort", "abort", "abort", "reset"]))
    def between_steps(self, data: st.DataObject, action: str) -> None:
        """An abort (of any unfinished request) or, less often, ``reset_prefix_cache``."""
        live = [i for i, r in enumerate(self.ex.reqs) if r.status != "finished"]
        if action == "abort" and live:
            self.ex.step(ops.Abort(data.draw(st.sampled_from(live), label="req")))
        elif action == "reset":
            self.ex.step(ops.ResetCache())


AVOIDABLE = frozenset({"preempt_scheduled"})


def bind(target: ManagerTarget, config: ManagerConfig,
         avoid: frozenset[str] = frozenset()) -> type[ManagerMachine]:
    """A machine over ``target``; ``avoid`` leaves generator features out (:data:`AVOIDABLE`)
    so a run with a known deviation there still explores the rest."""
    if avoid - AVOIDABLE:
        raise ValueError(f"unknown features to avoid: {sorted(avoid - AVOIDABLE)}")
    return type("ManagerMachine", (ManagerMachine,),
                {"target": target, "config": config, "avoid": frozenset(avoid)})


def program_of(machine: ManagerMachine) -> list[dict[str, Any]]:
    return ops.program_json(machine.ex.program)
