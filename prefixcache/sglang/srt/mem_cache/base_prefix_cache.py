"""Parameter and result records of the prefix caches (``sglang.srt.mem_cache.base_prefix_cache``).

Upstream carries KV slot indices as int64 tensors; here they are lists of ints (``value`` in
:class:`InsertParams` accepts any ``Sequence[int]``). Fields the bundled trees do not use
(Mamba, HiCache, sessions) are left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from prefixcache.sglang.srt.mem_cache.radix_cache import RadixKey, TreeNode

__all__ = [
    "DecLockRefParams",
    "DecLockRefResult",
    "EvictParams",
    "EvictResult",
    "IncLockRefResult",
    "InsertParams",
    "InsertResult",
    "MatchPrefixParams",
    "MatchResult",
    "TreeLock",
]


@dataclasses.dataclass
class MatchPrefixParams:
    key: RadixKey


@dataclasses.dataclass
class InsertParams:
    """``value``: the KV slots of ``key``'s tokens (at least the page-aligned key's length;
    a longer tail stays the caller's). ``prev_prefix_len``: how many leading slots the caller
    got from the tree itself (a match it holds a lock on); insert frees none of those."""

    key: RadixKey | None = None
    value: Sequence[int] | None = None
    prev_prefix_len: int = 0
    priority: int = 0


@dataclasses.dataclass
class InsertResult:
    """``prefix_len``: tokens of the aligned key the tree already held; ``total_len``: the
    aligned key's length (what the tree holds for it now)."""

    prefix_len: int
    total_len: int = 0
    last_device_node: TreeNode | None = None


@dataclasses.dataclass
class EvictParams:
    """``num_tokens`` of full KV to free; ``swa_num_tokens`` of sliding-window KV (a FULL +
    SWA tree; others ignore it)."""

    num_tokens: int = 0
    swa_num_tokens: int = 0


@dataclasses.dataclass
class EvictResult:
    num_tokens_evicted: int = 0
    swa_num_tokens_evicted: int = 0
    #: The slots returned to the allocator, in eviction order (not an upstream field).
    evicted_indices: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class IncLockRefResult:
    """The receipt of ``inc_lock_ref``: ``dec_lock_ref`` checks it names the same node."""

    delta: int = 0
    node_id: int | None = None

    def to_dec_params(self) -> DecLockRefParams:
        return DecLockRefParams(node_id=self.node_id)


@dataclasses.dataclass
class DecLockRefParams:
    node_id: int | None = None


@dataclasses.dataclass
class DecLockRefResult:
    delta: int = 0


@dataclasses.dataclass
class TreeLock:
    """A held lock; ``swa_released``: its SWA part was released early (``release_swa``)."""

    node: TreeNode
    receipt: DecLockRefParams
    swa_released: bool = False


class MatchResult(NamedTuple):
    """``device_prefix_len`` tokens matched (page-aligned); their slots are
    ``device_indices`` (also ``path_device_indices(last_device_node)``)."""

    device_prefix_len: int
    last_device_node: TreeNode
    last_host_node: TreeNode
    best_match_node: TreeNode
    device_indices: list[int] = []
    host_hit_length: int = 0
