"""The offload family's judge: a fresh manager and the tier model side by side, one operation
at a time (``OffloadJudge.step``): the target's answer, or a ``Violation`` naming the
invariant it broke (:class:`~models.families.offload.invariants.OffloadInvariants`), or
:class:`OutOfContract` for a program the connector never runs (loading a key that is not a
HIT, completing a job that is not in flight, using a request after it finished, a reset on a
manager without one).

After every step the judge asks the manager about every key (``HIT``, ``RESET``) and, where
it has a public free count, checks it (``ACCOUNT``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models.core.invariants import Violation
from models.families.offload import ops as o
from models.families.offload.invariants import OffloadInvariants as F
from models.families.offload.tier import TierModel
from properties.core.targets import Target
from properties.core.watchdog import Hang, StepTimeout, Watchdog
from properties.families.offload.adapter import StoreOut, Tier, tier
from properties.families.offload.targets import OffloadTarget


class OutOfContract(Exception):
    """A program the offload model cannot judge (see the module docstring)."""


@dataclass(slots=True)
class Step:
    """One operation the judge ran, the target's answer (or the error it raised) and the
    script line making the same call."""

    op: Any
    outcome: Any
    line: str = ""


def offload_target(target: Target) -> OffloadTarget:
    if not isinstance(target.caps, OffloadTarget):
        raise TypeError(f"{target.spec!r} is not an offload target")
    return target.caps


@dataclass
class OffloadJudge:
    """See the module docstring."""

    target: Target
    config: o.OffloadConfig
    log: list[Step] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.offload = offload_target(self.target)
        caps = self.offload.caps
        policy = self.target.allocator_type or "lru"
        cfg = self.config
        if cfg.num_chunks < 1 or cfg.store_threshold < 1 or cfg.max_tracker_size < 1:
            raise OutOfContract(f"not a tier shape: {cfg}")
        if cfg.store_threshold != 1 and not caps.store_threshold:
            raise OutOfContract("this manager takes no store_threshold")
        try:
            manager = self.offload.build(cfg.num_chunks, policy, cfg.events,
                                         cfg.store_threshold, cfg.max_tracker_size)
        except Exception as exc:
            raise Violation(F.CRASH, f"building a tier of {cfg.num_chunks} chunks raised "
                            f"{type(exc).__name__}: {exc}") from exc
        self.tier: Tier = tier(self.offload, manager)
        self.model = TierModel(cfg.num_chunks, policy, cfg.store_threshold,
                               cfg.max_tracker_size)
        self.replica: set[int] = set()  # the keys the events announced as stored
        self.before_reset: set[int] = set()  # keys resident at a reset, not stored since
        self.watchdog = Watchdog(self.target.step_timeout)
        self._check(None)

    # ------------------------------------------------------------------ stepping

    def step(self, op: Any) -> Any:
        index = len(self.log)
        misuse = self._contract(op)
        try:
            try:
                self.watchdog.arm()
                try:
                    outcome = self._step(op) if misuse is None else self._misuse(op, misuse)
                    self._check(op, index)
                finally:
                    self.watchdog.disarm()
            except StepTimeout:
                if len(self.log) == index:
                    self.log.append(Step(op, TimeoutError("step timed out"), self.tier.line(op)))
                raise Hang(F.TARGET, f"{op.kind} exceeded {self.watchdog.seconds:g} s (a "
                           "hang)") from None
        except Violation as violation:
            raise violation.at(op, index) from None
        return outcome

    def _contract(self, op: Any) -> str | None:
        """Raise :class:`OutOfContract` for a program the connector never runs; return what
        is wrong with a call the tier must refuse (a typed error, nothing changed), else None.
        Misuse is judged on the 0.33.0+ API only."""
        m = self.model
        judged = not self.offload.caps.legacy
        req = getattr(op, "req", None)
        if req is not None and req in m.finished and op.kind in (
                "new_request", "prepare_load", "prepare_store", "finish"):
            raise OutOfContract(f"request {req} finished; the scheduler names it no more")
        keys = getattr(op, "keys", None)
        if keys is not None and (not keys or not all(0 <= k < o.NUM_KEYS for k in keys)):
            raise OutOfContract(f"{op.kind} of keys {keys}: not keys of the universe")
        if keys is not None and len(set(keys)) != len(keys):
            if judged and isinstance(op, o.PrepareStore):
                return f"an offer names a key twice: {list(keys)}"
            raise OutOfContract(f"{op.kind} names a key twice: {list(keys)}")
        if isinstance(op, o.NewRequest) and op.req in m.positions:
            raise OutOfContract(f"request {op.req} already arrived")
        if isinstance(op, o.PrepareLoad):
            absent = [k for k in op.keys if m.lookup(k) != "HIT"]
            if absent and judged:
                return f"loading keys {absent}, which are not HIT"
            if absent:
                raise OutOfContract(f"loading keys {absent}, which are not HIT")
        if isinstance(op, o.CompleteLoad) and m.load_job(op.req, op.keys) is None:
            if judged and not any(set(j.keys) & set(op.keys) for j in m.load_jobs):
                return f"completing a load of {list(op.keys)}, which nothing is loading"
            raise OutOfContract(f"no load of {list(op.keys)} by request {op.req} in flight")
        if isinstance(op, o.CompleteStore) and m.store_job(op.req, op.keys) is None and (
                not judged or any(set(j.keys) & set(op.keys) for j in m.stores)):
            raise OutOfContract(f"no store of {list(op.keys)} by request {op.req} in flight")
        if isinstance(op, o.Reset) and not self.offload.caps.reset_cache:
            raise OutOfContract("this manager has no reset_cache")
        if isinstance(op, o.Lookup) and not 0 <= op.key < o.NUM_KEYS:
            raise OutOfContract(f"key {op.key} is outside the universe")
        return None

    def _snapshot(self) -> tuple[Any, ...]:
        """What a refused call must leave as it was: every key's lookup, the free count, each
        chunk's references (where the manager shows them)."""
        return (tuple(self.tier.lookup(None, k) for k in range(o.NUM_KEYS)),
                self.tier.free_count(), self.tier.pins())

    def _misuse(self, op: Any, why: str, may_ignore: bool = False) -> Any:
        """A call the tier must refuse with a typed error (``may_ignore``: or let through),
        changing nothing either way."""
        args = (op.req, op.keys, op.success) if isinstance(op, o.CompleteStore) else (
            op.req, op.keys)
        before = self._snapshot()
        line = self.tier.line(op)
        outcome: Any
        try:
            outcome = getattr(self.tier, op.kind)(*args)  # the Tier method of that name
        except Exception as exc:
            self.log.append(Step(op, exc, line))
            if not isinstance(exc, self.offload.misuse_types):
                rule = "may be refused only" if may_ignore else "must be refused"
                raise Violation(F.CRASH, f"{op.kind} misuse ({why}) {rule} with a typed error, "
                                f"raised {type(exc).__name__}: {exc}") from exc
            outcome, changed = exc, f"a refused {op.kind} changed the tier ({why})"
        else:
            self.log.append(Step(op, outcome, line))
            if not may_ignore:
                raise Violation(F.ATOMIC, f"{op.kind} must be refused, changing nothing; it "
                                f"went through ({why})", observed=outcome)
            changed = f"an ignored {op.kind} changed the tier ({why})"
        after = self._snapshot()
        if after != before:
            raise Violation(F.ATOMIC, changed, expected=before, observed=after)
        return outcome

    def _call(self, op: Any, method: Any, *args: Any) -> Any:
        line = self.tier.line(op)
        try:
            outcome = method(*args)
        except Exception as exc:
            self.log.append(Step(op, exc, line))
            raise Violation(F.CRASH, f"{op.kind} raised {type(exc).__name__}: {exc}") from exc
        self.log.append(Step(op, outcome, line))
        return outcome

    def _step(self, op: Any) -> Any:
        m, t = self.model, self.tier
        if isinstance(op, o.NewRequest):
            m.new_request(op.req, op.positions)
            return self._call(op, t.new_request, op.req, op.positions)
        if isinstance(op, o.Lookup):
            m.state(op.req)
            got = self._call(op, t.lookup, op.req, op.key)
            self._compare_lookup(op.key, got)
            return got
        if isinstance(op, o.PrepareLoad):
            return self._prepare_load(op)
        if isinstance(op, o.CompleteLoad):
            job = m.load_job(op.req, op.keys)
            self._call(op, t.complete_load, op.req, op.keys)
            if job is not None:
                m.complete_load(job)
            return None
        if isinstance(op, o.PrepareStore):
            return self._prepare_store(op)
        if isinstance(op, o.CompleteStore):
            job = m.store_job(op.req, op.keys)
            if job is None:  # a worker reporting twice: the tier may refuse or ignore it
                return self._misuse(op, f"completing a store of {list(op.keys)}, which "
                                        "nothing is writing", may_ignore=True)
            self._call(op, t.complete_store, op.req, op.keys, op.success)
            m.complete_store(job, op.success)
            return None
        if isinstance(op, o.Finish):
            m.state(op.req)
            self._call(op, t.finish, op.req)
            m.finish(op.req)
            return None
        if isinstance(op, o.Reset):
            self.before_reset |= set(m.chunk)
            self._call(op, t.reset)
            m.reset()
            return None
        if isinstance(op, o.Flushed):
            self._call(op, t.flushed)
            m.flushed()
            return None
        return self._take_events(op)

    # ------------------------------------------------------------------ loads

    def _prepare_load(self, op: o.PrepareLoad) -> Any:
        m = self.model
        chunks = self._call(op, self.tier.prepare_load, op.req, op.keys)
        if len(chunks) != len(op.keys) or not all(type(c) is int for c in chunks):
            raise Violation(F.TARGET, "prepare_load answers one int chunk id per key",
                            expected=len(op.keys), observed=chunks)
        for key, chunk in zip(op.keys, chunks, strict=True):
            if m.content.get(chunk) != key:
                raise Violation(F.HIT, f"the chunk loaded for HIT key {key} holds other "
                                "content", expected=f"chunk holding key {key}",
                                observed=f"chunk {chunk} holding {m.content.get(chunk)}")
        m.prepare_load(op.req, op.keys, chunks)
        return chunks

    # ------------------------------------------------------------------ stores

    def _prepare_store(self, op: o.PrepareStore) -> Any:
        m = self.model
        busy = m.busy_chunks()
        was = {k: (m.chunk[k], k in m.ready, m.loads[k]) for k in m.chunk}
        plan = m.prepare_store(op.req, op.keys)
        out: StoreOut | None = self._call(op, self.tier.prepare_store, op.req, op.keys)
        if out is None:
            if plan.evicted is not None:
                raise Violation(F.ACCOUNT, "a store that fits (with evictions) is refused",
                                expected=f"store {list(plan.to_store)}, evict "
                                f"{sorted(plan.evicted)}", observed=None)
            return None
        n = self.config.num_chunks
        if len(out.chunks) != len(out.to_store) or not all(type(c) is int for c in out.chunks):
            raise Violation(F.TARGET, "prepare_store answers one int chunk id per key to store",
                            expected=list(out.to_store), observed=list(out.chunks))
        for key in out.evicted:
            if key in op.keys:
                raise Violation(F.PINNED, f"key {key} of the offer is evicted",
                                expected="no key of the offer evicted",
                                observed=list(out.evicted))
            if key not in was:
                raise Violation(F.ACCOUNT, f"evicted key {key} was not stored",
                                observed=list(out.evicted))
            chunk, ready, loads = was[key]
            if not ready or loads:
                raise Violation(F.PINNED, f"key {key} is evicted while "
                                f"{'its write is pending' if not ready else 'a load reads it'}",
                                observed=list(out.evicted))
        freed = {was[k][0] for k in out.evicted}
        if len(set(out.chunks)) != len(out.chunks) or not all(0 <= c < n for c in out.chunks):
            raise Violation(F.ACCOUNT, f"a store's chunks are distinct and in range(0, {n})",
                            observed=list(out.chunks))
        for key, chunk in zip(out.to_store, out.chunks, strict=True):
            why = busy.get(chunk)
            if why is None or (chunk in freed and not why.startswith(("being", "in flight"))):
                continue
            inv = F.ACCOUNT if why.startswith("holding") else F.PINNED
            raise Violation(inv, f"key {key} is handed chunk {chunk} {why}",
                            expected="a free chunk", observed=chunk)
        if out.to_store != plan.to_store:
            stray = [k for k in out.to_store if k not in plan.absent]
            inv = F.ACCOUNT if stray else F.ADMIT
            what = (f"keys {stray} are stored again while resident" if stray else
                    "keys_to_store are the offer's absent keys store_threshold admits")
            raise Violation(inv, what, expected=list(plan.to_store),
                            observed=list(out.to_store))
        if plan.evicted is None:
            raise Violation(F.ACCOUNT, "a store is accepted though not enough chunks can be "
                            "freed", expected=None, observed=out)
        if sorted(out.evicted) != sorted(plan.evicted):
            raise Violation(F.ORDER, f"the {m.policy.name} policy evicts other keys",
                            expected=sorted(plan.evicted), observed=sorted(out.evicted))
        m.assign(op.req, out.to_store, out.chunks)
        self.before_reset -= set(out.to_store)
        return out

    # ------------------------------------------------------------------ events and checks

    def _take_events(self, op: o.TakeEvents) -> Any:
        events = self._call(op, self.tier.take_events)
        for removed, keys in events:
            if removed:
                self.replica.difference_update(keys)
            else:
                self.replica.update(keys)
        if self.config.events and self.replica != self.model.served():
            raise Violation(F.EVENTS, "the events replayed rebuild other keys than those "
                            "served", expected=sorted(self.model.served()),
                            observed=sorted(self.replica))
        return events

    def _compare_lookup(self, key: int, got: str) -> None:
        want = self.model.lookup(key)
        if self.tier.legacy and want == "HIT_PENDING":
            want = "MISS"  # the 0.11.0 API cannot say a key is being written
        if got == want:
            return
        if want == "MISS" and key in self.before_reset:
            raise Violation(F.RESET, f"key {key}, resident before a reset, is served after it",
                            expected=want, observed=got)
        raise Violation(F.HIT, f"lookup of key {key}", expected=want, observed=got)

    def _check(self, op: Any, index: int = 0) -> None:
        """What must hold after every step: each key's lookup, the free count."""
        for key in range(o.NUM_KEYS):
            try:
                got = self.tier.lookup(None, key)
            except Exception as exc:
                raise Violation(F.CRASH, f"lookup of key {key} raised "
                                f"{type(exc).__name__}: {exc}") from exc
            self._compare_lookup(key, got)
        free = self.tier.free_count()
        if free is not None and free != self.model.free():
            raise Violation(F.ACCOUNT, "get_num_free_chunks counts the chunks neither stored, "
                            "pending nor in flight at a reset", expected=self.model.free(),
                            observed=free)
