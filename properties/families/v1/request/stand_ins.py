"""Stand-ins for the engine modules the v1 manager closure adds, and the request it reads.

The block level's stand-ins (:mod:`properties.families.v1.stand_ins`) cover the pool; the manager
additionally imports, at module level or through its spec registry:

* ``vllm.v1.request.RequestStatus`` (an ``IntEnum`` whose order matters: anything after
  ``PREEMPTED`` is finished) and the request fields the scheduler maintains
  (:class:`ManagerRequest`);
* ``vllm.utils.torch_utils.get_dtype_size`` (the element size of a real torch dtype);
* ``vllm.v1.attention.backends.registry.MambaAttentionBackendEnum`` (a spec field's default);
* ``vllm.config.get_current_vllm_config_or_none`` (None: no engine config) and
  ``vllm.platforms.current_platform`` (registers no custom specs), both reached from the
  registry's first use;
* ``vllm.v1.metrics.stats.PrefixCacheStats`` (with ``log_stats``): the counters the manager
  aggregates its lookups into (:class:`PrefixCacheStats`; the block level's stats stand-in
  otherwise).

Nothing here changes what the manager computes: the suite runs without an engine config,
platform plugins, Mamba layers or attention backends.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from properties.families.v1 import stand_ins as block_stand_ins
from properties.families.v1.stand_ins import StandInRequest

__all__ = ["STUBS", "ManagerRequest", "PrefixCacheStats", "RequestStatus"]


class RequestStatus(enum.IntEnum):
    """Upstream's order: statuses after ``PREEMPTED`` are finished."""

    WAITING = enum.auto()
    WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR = enum.auto()
    WAITING_FOR_REMOTE_KVS = enum.auto()
    WAITING_FOR_STREAMING_REQ = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    FINISHED_STOPPED = enum.auto()


@dataclass(eq=False)
class ManagerRequest(StandInRequest):
    """What the manager reads of a scheduler's request, beyond the block level's fields.

    ``append`` adds sampled tokens and extends ``block_hashes`` with the release's own hasher,
    as upstream's ``Request.append_output_token_ids`` does.
    """

    num_prompt_tokens: int = 0
    num_computed_tokens: int = 0
    status: RequestStatus = RequestStatus.WAITING
    num_in_flight_tokens: int = 0  # synchronous scheduling: nothing in flight
    num_preemptions: int = 0
    shared_prefix_boundary: int = 0
    skip_reading_prefix_cache: bool = False
    hasher: Callable[[Any], Sequence[bytes]] | None = field(default=None, repr=False)

    @property
    def prefix_cache_hit_limit(self) -> int | None:
        """0.34: how many leading tokens may be read from the prefix cache (0: the request skips
        cache reads, None: unbounded); the suite drives only ``skip_reading_prefix_cache``."""
        return 0 if self.skip_reading_prefix_cache else None

    def get_max_cache_hit_length(self, bound: int | None = None) -> int:
        """0.34: the longest hit allowed: the last token is always recomputed, and the limit and
        ``bound`` (when given) only tighten it."""
        limits = (self.num_tokens - 1, self.prefix_cache_hit_limit, bound)
        return min(limit for limit in limits if limit is not None)

    @property
    def skip_reading_external_kv(self) -> bool:
        return self.prefix_cache_hit_limit is not None

    def rehash(self) -> None:
        if self.hasher is not None:
            self.block_hashes.extend(self.hasher(self))

    def append(self, token: int) -> None:
        self.all_token_ids.append(token)
        self.rehash()


@dataclass
class PrefixCacheStats:
    """The prefix cache counters of one stats interval, as the releases define them: ``reset``
    (the cache was reset), and per admitted lookup the request count, the tokens queried and
    the tokens hit, kept apart for requests admitted again after a preemption. Connector
    hits by source are outside the suite (no connector): ``hits_by_source`` stays empty."""

    reset: bool = False
    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0
    hits_by_source: dict[Any, int] = field(default_factory=dict)

    def record(self, num_tokens: int, num_hits: int, preempted: bool,
               hits_by_source: dict[Any, int] | None = None) -> None:
        """Count one lookup of ``num_tokens`` tokens that hit ``num_hits``."""
        if hits_by_source:
            raise NotImplementedError("hits by source come from a KV connector (not stubbed)")
        if preempted:
            self.preempted_requests += 1
            self.preempted_queries += num_tokens
            self.preempted_hits += num_hits
        else:
            self.requests += 1
            self.queries += num_tokens
            self.hits += num_hits


def _build_metrics_stats(module: ModuleType) -> None:
    block_stand_ins.STUBS["vllm.v1.metrics.stats"](module)
    vars(module).update(PrefixCacheStats=PrefixCacheStats)


def _build_request(module: ModuleType) -> None:
    vars(module).update(Request=ManagerRequest, RequestStatus=RequestStatus)
    block_stand_ins._placeholders(module)


def _build_torch_utils(module: ModuleType) -> None:
    def get_dtype_size(dtype: Any) -> int:
        import torch

        return int(torch.tensor([], dtype=dtype).element_size())

    vars(module).update(get_dtype_size=get_dtype_size)


def _build_backends_registry(module: ModuleType) -> None:
    class MambaAttentionBackendEnum(enum.Enum):
        MAMBA1 = "mamba1"
        MAMBA2 = "mamba2"
        SHORT_CONV = "short_conv"
        LINEAR = "linear"
        GDN_ATTN = "gdn_attn"

    MambaAttentionBackendEnum.__module__ = module.__name__
    vars(module).update(MambaAttentionBackendEnum=MambaAttentionBackendEnum)
    block_stand_ins._placeholders(module)


def _build_config(module: ModuleType) -> None:
    vars(module).update(get_current_vllm_config_or_none=lambda: None)
    block_stand_ins._placeholders(module)


def _build_platforms(module: ModuleType) -> None:
    class _Platform:
        def register_custom_kv_cache_specs(self, _vllm_config: object) -> None:
            return None

    vars(module).update(current_platform=_Platform())


# The block level's stand-ins, minus the spec modules (real here), plus the manager's.
STUBS: dict[str, Callable[[ModuleType], None]] = {
    **{name: build for name, build in block_stand_ins.STUBS.items()
       if name not in ("vllm.v1.kv_cache_interface", "vllm.v1.kv_cache_spec_registry")},
    "vllm.v1.request": _build_request,
    "vllm.config": _build_config,
    "vllm.platforms": _build_platforms,
    "vllm.utils.torch_utils": _build_torch_utils,
    "vllm.v1.attention.backends.registry": _build_backends_registry,
    "vllm.v1.metrics.stats": _build_metrics_stats,
}
