"""The vocabulary of the v1 request level: what a scheduler does with a ``KVCacheManager``.

Requests are named by their index in the program. A step opens with its first ``Schedule`` and
closes with ``EndStep``: the scheduled tokens are computed when the step ends (their KV becomes
valid), then each request that computed its last token samples its next output (or finishes
and is freed when none is left). ``Preempt`` may come inside a step (a priority scheduler
preempts requests it already scheduled); ``Abort`` and ``Reset`` come between steps.

Queries a scheduler makes of the manager are operations too, where the release has them:
``CachedTokens`` (0.34's ``get_num_cached_tokens``, its cache-aware ordering of waiting
requests before a step) and ``CommonPrefix`` (0.33's ``get_num_common_prefix_blocks``, asked
for a running request when a step is scheduled). ``EndStep`` also makes the calls the scheduler
makes once per step: the stats it logs (``usage``; with ``log_stats``, ``make_prefix_cache_stats``)
and the block ids covering each running request's computed tokens
(``get_block_ids_for_computed_tokens``, what a KV connector saves). ``Evict`` is a connector's
failed load, whose blocks the scheduler evicts from the prefix cache (``evict_blocks``).
With events on, ``TakeEvents`` follows each step (``take_events``, what the scheduler publishes
to KV-aware routers); ``EndStep`` also estimates the cached tokens of each request whose prompt
it completes (``estimate_cached_tokens``, the prefill stats of its first output).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class ROp:
    name: ClassVar[str] = ""

    @property
    def kind(self) -> str:
        """The operation kind, as the core's signatures and ``match.ops`` rules read it."""
        return self.name

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.name}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True, slots=True)
class Add(ROp):
    """A new request: its prompt, the outputs it will sample in order, and its key inputs."""

    name: ClassVar[str] = "add"
    prompt: tuple[int, ...]
    outputs: tuple[int, ...] = ()
    salt: str | None = None
    lora: int | None = None


@dataclass(frozen=True, slots=True)
class Schedule(ROp):
    """Schedule ``n`` tokens of request ``req`` (a waiting one first looks up its prefix hit:
    ``n`` counts the tokens after the hit), with ``lookahead`` speculative slots."""

    name: ClassVar[str] = "schedule"
    req: int
    n: int
    lookahead: int = 0


@dataclass(frozen=True, slots=True)
class EndStep(ROp):
    name: ClassVar[str] = "end_step"


@dataclass(frozen=True, slots=True)
class Preempt(ROp):
    name: ClassVar[str] = "preempt"
    req: int


@dataclass(frozen=True, slots=True)
class Abort(ROp):
    name: ClassVar[str] = "abort"
    req: int


@dataclass(frozen=True, slots=True)
class ResetCache(ROp):
    name: ClassVar[str] = "reset_prefix_cache"


@dataclass(frozen=True, slots=True)
class Evict(ROp):
    """A KV connector reports that request ``req``'s blocks from block index ``start`` on (in
    every group) failed to load: the scheduler evicts them from the prefix cache
    (``evict_blocks``), between steps."""

    name: ClassVar[str] = "evict"
    req: int
    start: int = 0


@dataclass(frozen=True, slots=True)
class CachedTokens(ROp):
    """How many of waiting request ``req``'s tokens the cache holds, without taking them."""

    name: ClassVar[str] = "cached_tokens"
    req: int


@dataclass(frozen=True, slots=True)
class CommonPrefix(ROp):
    """How many leading blocks per group running request ``req`` shares with every running
    request (what cascade attention may compute once)."""

    name: ClassVar[str] = "common_prefix"
    req: int


@dataclass(frozen=True, slots=True)
class TakeEvents(ROp):
    """The KV events the manager queued since the last take (``take_events``): the
    scheduler publishes them once per step, after the step's outputs."""

    name: ClassVar[str] = "take_events"


ROPS: dict[str, type[ROp]] = {c.name: c for c in (Add, Schedule, EndStep, Preempt, Abort,
                                                  ResetCache, Evict, CachedTokens,
                                                  CommonPrefix, TakeEvents)}


def from_json(record: dict[str, Any]) -> ROp:
    data = dict(record)
    cls = ROPS[data.pop("op")]
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def program_json(program: list[ROp]) -> list[dict[str, Any]]:
    return [op.to_json() for op in program]
