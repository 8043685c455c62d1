"""A request as the cache's request API reads it (``sglang.srt.managers.schedule_batch``):
``Req`` with its token ids and its KV record ``ReqKvInfo``, the fields SGLang 0.5.23's
``checkpoint`` / ``release_kv_cache`` (and 0.5.18's ``cache_unfinished_req`` /
``cache_finished_req``) use, nothing of sampling or batching.

A request's tokens are ``origin_input_ids`` (its prompt) then ``output_ids`` (what it
sampled). Its KV lives in one row of the request-to-token pool (``kv.req_pool_idx``): positions
``[0, kv.kv_committed_len)`` hold KV that was computed; ``[0, kv.cache_protected_len)`` are the
tree's (the match at admission, then what each checkpoint published), the rest is the
request's own. ``lock`` is the tree lock it holds on ``last_node`` (None: none).
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["Req", "ReqKvInfo"]


@dataclasses.dataclass(slots=True)
class ReqKvInfo:
    """The request's KV record: its row, and how much of it is the tree's / computed."""

    req_pool_idx: int | None = None
    cache_protected_len: int = 0
    kv_committed_len: int = 0
    kv_allocated_len: int = 0

    @property
    def holds_kv(self) -> bool:
        return self.req_pool_idx is not None


class Req:
    """``Req(rid, origin_input_ids, extra_key=None)``; the scheduler appends to
    ``output_ids`` and sets ``finished_reason`` when the request stops."""

    def __init__(self, rid: str, origin_input_ids: list[int],
                 extra_key: str | None = None) -> None:
        self.rid = rid
        self.origin_input_ids = list(origin_input_ids)
        self.output_ids: list[int] = []
        self.extra_key = extra_key
        self.kv = ReqKvInfo()
        self.prefix_len = 0
        self.last_node: Any = None
        self.lock: Any = None
        self.finished_reason: object = None

    @property
    def full_untruncated_fill_ids(self) -> list[int]:
        """The prompt then the outputs (what the row's positions hold the KV of)."""
        return self.origin_input_ids + self.output_ids

    @property
    def fill_ids(self) -> list[int]:
        return self.full_untruncated_fill_ids

    def finished(self) -> bool:
        return self.finished_reason is not None

    def owned_kv_len(self) -> int:
        """The row positions whose KV the request computed."""
        return self.kv.kv_committed_len

    def reset_for_retract(self) -> None:
        """Back to waiting after a retraction (its prompt and outputs are kept)."""
        self.prefix_len = 0
        self.last_node = None
        self.lock = None
        self.kv.cache_protected_len = 0
        self.kv.kv_committed_len = 0
        self.kv.kv_allocated_len = 0

    def __repr__(self) -> str:
        return (f"Req({self.rid!r}, tokens={len(self.fill_ids)}, "
                f"committed={self.kv.kv_committed_len}, "
                f"protected={self.kv.cache_protected_len})")
