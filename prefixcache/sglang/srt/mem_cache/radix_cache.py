"""The radix prefix cache (``sglang.srt.mem_cache.radix_cache``), standard library only.

Names and calls mirror SGLang's 0.5.23 tree API (``RadixCache(CacheInitParams(...))``,
``match_prefix(MatchPrefixParams(key))``, ``insert(InsertParams(key, value, prev_prefix_len))``,
``inc_lock_ref``/``dec_lock_ref``/``lock``/``unlock``, ``evict(EvictParams(n))``,
``evictable_size``/``protected_size``/``total_size``, ``reset``, ``path_device_indices``), so a
scheduler switches imports. KV slot indices are lists of ints, not tensors.

Contract:

* **Pages.** Keys are truncated to a multiple of ``page_size`` before match and insert; a key
  shorter than a page matches and inserts nothing. Nodes split only at page boundaries.
* **Match.** ``match_prefix`` returns the longest cached page-aligned prefix of the key in its
  ``extra_key`` namespace, and ``device_indices``: exactly one slot per matched token, the KV of
  those tokens. It may split a node (sizes unchanged) and refreshes the path's LRU time.
* **Insert and ownership.** The tree, the running requests and the allocator's free list
  partition the pool: each slot has exactly one owner. ``insert`` adopts the value's slots past
  what the tree held; for the part the tree already held, the caller's slots at positions
  ``[prev_prefix_len, prefix_len)`` that differ from the tree's are duplicates and are freed
  to the allocator by ``insert`` (as SGLang's ``UnifiedRadixCache`` does; the classic upstream
  tree leaves that to the caller). Slots at ``[0, prev_prefix_len)`` came from the tree (the
  caller's matched prefix) and the value's tail past the aligned key stays the caller's.
* **Locks.** ``inc_lock_ref(node)`` locks the node and its ancestors and returns a receipt;
  ``dec_lock_ref`` releases it, checking the receipt (when given) names the node. A lock count
  never goes below zero (:class:`LockUnderflowError`), a node of another tree or an evicted node
  is refused (:class:`NodeNotInTreeError`), both before any change. A split copies the lock
  count to the new parent, so it keeps its locks.
* **Sizes.** ``evictable_size()`` (unlocked tokens) + ``protected_size()`` (locked tokens) =
  ``total_size()`` = the tokens in the tree, kept as counters (O(1)).
* **Eviction.** Only unlocked leaves, least recently used first (a per-tree access counter,
  ties by node creation order); whole leaves, so it may free more than asked; a parent left
  childless and unlocked becomes a candidate. Each evicted slot goes back to the allocator
  exactly once (``free_segment``) and is listed in ``EvictResult.evicted_indices``.
* **Requests.** The request API moves a running request's KV row (``req_to_token_pool``, see
  :mod:`prefixcache.sglang.srt.managers.schedule_batch`) in and out of the tree:
  ``checkpoint(req, up_to=n)`` (0.5.18: ``cache_unfinished_req(req, chunked=True)``) inserts the
  page-aligned first ``n`` tokens with ``prev_prefix_len = cache_protected_len``, points the
  row at the tree's slots, moves the request's lock to the inserted node and advances
  ``cache_protected_len``; ``n`` past the KV the request computed is refused
  (:class:`RequestStateError`): a hit must cover computed KV only. Where the request has
  outputs, the node is split at its prompt's page-aligned end. ``release_kv_cache(req, self,
  checkpoint=...)`` (``common``; 0.5.18: ``cache_finished_req(req)``) checkpoints when asked,
  frees the row's own part ``[cache_protected_len, computed)`` once, releases the lock and the
  row. Every check runs before any change.
* **Namespaces.** Keys with different ``extra_key`` never share a node (the root's children are
  keyed by ``(extra_key, first page)``).
* **Cost.** Match, insert and lock calls cost O(key length or depth) plus dict lookups; eviction
  pops a heap of candidate leaves (lazy invalidation, compacted when stale entries dominate).
  Only :meth:`RadixCache.sanity_check` walks the whole tree.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from prefixcache.sglang.errors import (
    InvalidArgumentError,
    LockUnderflowError,
    NodeNotInTreeError,
    ReceiptMismatchError,
    RequestStateError,
    SGLangCacheError,
)
from prefixcache.sglang.srt.managers.schedule_batch import Req
from prefixcache.sglang.srt.mem_cache.allocator import BaseTokenToKVPoolAllocator
from prefixcache.sglang.srt.mem_cache.base_prefix_cache import (
    DecLockRefParams,
    DecLockRefResult,
    EvictParams,
    EvictResult,
    IncLockRefResult,
    InsertParams,
    InsertResult,
    MatchPrefixParams,
    MatchResult,
    TreeLock,
)
from prefixcache.sglang.srt.mem_cache.cache_init_params import CacheInitParams
from prefixcache.sglang.srt.mem_cache.memory_pool import ReqToTokenPool

__all__ = ["MatchResult", "RadixCache", "RadixKey", "Req", "ReqToTokenPool", "TreeNode",
           "release_kv_cache"]


class RadixKey:
    """Token ids and the ``extra_key`` namespace (LoRA id, cache salt) they live in."""

    __slots__ = ("extra_key", "token_ids")

    def __init__(self, token_ids: Sequence[int], extra_key: str | None = None) -> None:
        self.token_ids = token_ids
        self.extra_key = extra_key

    def __len__(self) -> int:
        return len(self.token_ids)

    def __iter__(self) -> Iterator[int]:
        return iter(self.token_ids)

    def page_aligned(self, page_size: int) -> RadixKey:
        """The key cut to a multiple of ``page_size`` tokens."""
        if page_size == 1:
            return self
        return RadixKey(self.token_ids[: len(self.token_ids) // page_size * page_size],
                        self.extra_key)

    def __repr__(self) -> str:
        return f"RadixKey(extra_key={self.extra_key!r}, token_ids={list(self.token_ids)[:10]})"


class TreeNode:
    """A run of tokens (``key``) and their KV slots (``value``); the root has neither."""

    __slots__ = ("children", "extra_key", "id", "key", "last_access_time", "lock_ref",
                 "parent", "value")

    def __init__(self, node_id: int, parent: TreeNode | None, key: list[int],
                 value: list[int], extra_key: str | None, stamp: int) -> None:
        self.children: dict[Hashable, TreeNode] = {}
        self.parent = parent
        self.key = key
        self.value = value
        self.extra_key = extra_key
        self.lock_ref = 0
        self.last_access_time = stamp
        self.id = node_id

    @property
    def evicted(self) -> bool:
        """Whether the node left its tree (evicted, or dropped by ``reset``)."""
        return self.parent is None and self.id != 0

    def __lt__(self, other: TreeNode) -> bool:
        return (self.last_access_time, self.id) < (other.last_access_time, other.id)

    def __repr__(self) -> str:
        return f"TreeNode(id={self.id}, len={len(self.key)}, lock_ref={self.lock_ref})"


def _common_len(a: list[int], t: list[int], off: int, limit: int) -> int:
    """Length of the common prefix of ``a`` and ``t[off:]`` (at most ``limit``), found by
    comparing doubling windows with slice equality and bisecting the first unequal one."""
    lo, step = 0, 8
    while lo < limit:
        hi = min(lo + step, limit)
        if a[lo:hi] != t[off + lo:off + hi]:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[lo:mid] == t[off + lo:off + mid]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo, step = hi, step * 2
    return limit


class RadixCache:
    """The radix tree over KV slots (see the module docstring for the contract)."""

    def __init__(self, params: CacheInitParams) -> None:
        if not isinstance(params.page_size, int) or params.page_size < 1:
            raise InvalidArgumentError(f"page_size must be a positive int, got "
                                       f"{params.page_size!r}")
        if params.eviction_policy.lower() != "lru":
            raise InvalidArgumentError(f"eviction policy {params.eviction_policy!r}: only "
                                       "'lru' is implemented")
        self.disable = params.disable
        self.req_to_token_pool = params.req_to_token_pool
        # A token or paged allocator (the SWA one belongs to SWARadixCache).
        self.token_to_kv_pool_allocator: BaseTokenToKVPoolAllocator | None = (
            params.token_to_kv_pool_allocator)  # type: ignore[assignment]
        self.page_size = params.page_size
        self.device = "cpu"
        self.reset()

    @classmethod
    def create_simulated(cls, disable: bool = False,
                         mock_allocator: BaseTokenToKVPoolAllocator | None = None,
                         page_size: int = 1) -> RadixCache:
        """A tree without a request pool (and, by default, without an allocator)."""
        return cls(CacheInitParams(disable=disable, req_to_token_pool=None,
                                   token_to_kv_pool_allocator=mock_allocator,
                                   page_size=page_size))

    # ------------------------------------------------------------------ #
    # Public API
    # ------------------------------------------------------------------ #

    def reset(self) -> None:
        """An empty tree (the allocator is not touched: the caller clears it)."""
        self._next_id = 1
        self._clock = 0
        self.root_node = TreeNode(0, None, [], [], None, 0)
        self.root_node.lock_ref = 1
        self.evictable_size_ = 0
        self.protected_size_ = 0
        self.evictable_leaves: set[TreeNode] = set()
        self._heap: list[tuple[int, int, TreeNode]] = []

    def match_prefix(self, params: MatchPrefixParams) -> MatchResult:
        """The longest cached page-aligned prefix of ``params.key`` and its slots."""
        key = params.key
        if self.disable:
            return self._result(self.root_node, 0, [])
        tokens = self._tokens(key)
        if not tokens:
            return self._result(self.root_node, 0, [])
        node, matched, values = self._match(tokens, key.extra_key)
        indices: list[int] = []
        for value in values:
            indices += value
        return self._result(node, matched, indices)

    def insert(self, params: InsertParams) -> InsertResult:
        """Add ``params.key`` with slots ``params.value``; see the module docstring for which
        slots the tree adopts and which it frees. Raises before any change when the value is
        shorter than the aligned key, ``prev_prefix_len`` is negative, or (with an allocator)
        a slot to adopt or free is not allocated."""
        if self.disable:
            return InsertResult(prefix_len=0)
        key = params.key
        if key is None:
            raise InvalidArgumentError("insert needs a key")
        tokens = self._tokens(key)
        n = len(tokens)
        if params.value is None:
            value = list(tokens)  # upstream's debug fallback: the token ids as values
        else:
            if len(params.value) < n:
                raise InvalidArgumentError(f"value has {len(params.value)} slots for a "
                                           f"{n}-token aligned key")
            value = list(params.value[:n])
        prev = params.prev_prefix_len
        if not isinstance(prev, int) or prev < 0:
            raise InvalidArgumentError(f"prev_prefix_len must be a non-negative int, got "
                                       f"{prev!r}")
        if n == 0:
            return InsertResult(prefix_len=0, total_len=0, last_device_node=self.root_node)
        # Phase 1 (read only): the matched path, the split point, the duplicates.
        node, pos, split_child, split_at = self._walk(tokens, key.extra_key)
        duplicates = self._duplicates(node, pos, split_child, split_at, value, prev)
        alloc = self.token_to_kv_pool_allocator
        if alloc is not None:
            matched = pos + split_at
            fresh = value[matched:]
            if not (alloc.all_allocated(fresh) and alloc.all_allocated(duplicates)):
                bad = [s for s in fresh + duplicates if not alloc.allocated(s)]
                raise InvalidArgumentError(f"insert: slots {bad[:8]} are not allocated (free "
                                           "or outside the pool); the tree would own them")
        # Phase 2: mutate.
        stamp = self._tick()
        self._stamp_path(node, stamp)
        if split_child is not None:
            node = self._split_touched(split_child, split_at, stamp)
            pos += split_at
        prefix_len = pos
        if pos < n:
            leaf = TreeNode(self._new_id(), node, tokens[pos:], value[pos:], key.extra_key,
                            stamp)
            node.children[self._child_key(leaf)] = leaf
            self.evictable_size_ += n - pos
            self._refresh(node)
            self._refresh(leaf)
            node = leaf
        else:
            self._refresh(node)
        if duplicates and alloc is not None:
            alloc.free(duplicates)
        return InsertResult(prefix_len=prefix_len, total_len=n, last_device_node=node)

    def evict(self, params: EvictParams) -> EvictResult:
        """Evict unlocked leaves, LRU first, until ``num_tokens`` are freed or none is left."""
        num_tokens = params.num_tokens
        if not isinstance(num_tokens, int) or num_tokens < 0:
            raise InvalidArgumentError(f"num_tokens must be a non-negative int, got "
                                       f"{num_tokens!r}")
        result = EvictResult()
        if self.disable:
            return result
        alloc = self.token_to_kv_pool_allocator
        heap, leaves, root = self._heap, self.evictable_leaves, self.root_node
        evicted = 0
        freed = result.evicted_indices
        while evicted < num_tokens and heap:
            stamp, _, node = heapq.heappop(heap)
            if stamp != node.last_access_time or node not in leaves:
                continue
            parent = node.parent
            if parent is None:  # unreachable: leaves holds only attached nodes
                raise SGLangCacheError("an evictable leaf without a parent")
            del parent.children[self._child_key(node)]
            leaves.discard(node)
            node.parent = None
            self.evictable_size_ -= len(node.key)
            if alloc is not None:
                alloc.free_segment(node.value, start_pos=0)
            freed += node.value
            evicted += len(node.value)
            if parent is not root:
                self._refresh(parent)
        result.num_tokens_evicted = evicted
        return result

    def inc_lock_ref(self, node: TreeNode) -> IncLockRefResult:
        """Lock ``node`` and its ancestors; ``delta``: minus the tokens that became locked."""
        self._check_in_tree(node)
        if self.disable:
            return IncLockRefResult(delta=0, node_id=node.id)
        delta = 0
        root, leaves = self.root_node, self.evictable_leaves
        x = node
        while x is not root:
            if x.lock_ref == 0:
                size = len(x.key)
                self.evictable_size_ -= size
                self.protected_size_ += size
                delta -= size
                leaves.discard(x)
            x.lock_ref += 1
            x = x.parent  # type: ignore[assignment]  # checked: the chain reaches the root
        return IncLockRefResult(delta=delta, node_id=node.id)

    def dec_lock_ref(self, node: TreeNode, params: DecLockRefParams | None = None
                     ) -> DecLockRefResult:
        """Release one lock of ``node`` and its ancestors; ``delta``: the tokens that became
        evictable. Raises before any change on a foreign/evicted node, a receipt for another
        node, or a node whose lock count is 0."""
        if params is not None and params.node_id is not None and params.node_id != node.id:
            raise ReceiptMismatchError(f"receipt of node {params.node_id} used to unlock "
                                       f"node {node.id}")
        self._check_in_tree(node)
        if self.disable or node is self.root_node:
            return DecLockRefResult(delta=0)
        if node.lock_ref <= 0:
            raise LockUnderflowError(f"node {node.id} is not locked")
        delta = 0
        root = self.root_node
        x = node
        while x is not root:
            x.lock_ref -= 1
            if x.lock_ref == 0:
                size = len(x.key)
                self.evictable_size_ += size
                self.protected_size_ -= size
                delta += size
                self._refresh(x)
            x = x.parent  # type: ignore[assignment]  # checked: the chain reaches the root
        return DecLockRefResult(delta=delta)

    def lock(self, node: TreeNode) -> TreeLock:
        """``inc_lock_ref`` with its receipt kept, for ``unlock``."""
        return TreeLock(node, self.inc_lock_ref(node).to_dec_params())

    def unlock(self, lock: TreeLock | None) -> None:
        if lock is not None:
            self.dec_lock_ref(lock.node, lock.receipt)

    # ------------------------------------------------------------------ #
    # Request API
    # ------------------------------------------------------------------ #

    def checkpoint(self, req: Req, *, up_to: int) -> None:
        """Publish the request's first ``up_to`` tokens (page-aligned) into the tree; see the
        module docstring. Raises before any change on a request without a row, an ``up_to``
        outside ``[cache_protected_len, computed]``, or a lock that is not live."""
        row = self._row_of(req)
        kv = req.kv
        protected = kv.cache_protected_len
        if not isinstance(up_to, int) or not protected <= up_to <= kv.kv_committed_len:
            raise RequestStateError(f"checkpoint up_to={up_to!r} outside [protected "
                                    f"{protected}, computed {kv.kv_committed_len}] of {req!r}")
        self._check_lock(req)
        if self.disable:
            return
        ps = self.page_size
        aligned = up_to // ps * ps
        if aligned == 0:
            return
        tokens = req.fill_ids[:aligned]
        value = row[:aligned]
        result = self.insert(InsertParams(RadixKey(tokens, req.extra_key), value,
                                          prev_prefix_len=protected))
        node = result.last_device_node
        if not isinstance(node, TreeNode):  # unreachable: a non-empty insert ends on a node
            raise SGLangCacheError("insert ended on no node")
        prompt = len(req.origin_input_ids) // ps * ps
        if 0 < prompt < aligned:  # split at the prompt's end: outputs evictable alone
            self.insert(InsertParams(RadixKey(tokens[:prompt], req.extra_key),
                                     value[:prompt], prev_prefix_len=prompt))
        new_indices = self.path_device_indices(node)
        if protected < aligned and kv.req_pool_idx is not None:  # checked: it holds a row
            self._pool().write((kv.req_pool_idx, slice(protected, aligned)),
                               new_indices[protected:])
        self.unlock(req.lock)
        req.lock = self.lock(node)
        req.last_node = node
        kv.cache_protected_len = aligned

    def free_kv_row(self, kv: Any, ranges: list[tuple[int, int]]) -> None:
        """Give back the row positions ``[start, end)`` of each range (whole pages, once)."""
        alloc = self.token_to_kv_pool_allocator
        if alloc is None:
            raise RequestStateError("free_kv_row needs an allocator")
        row = self._pool().req_to_token[kv.req_pool_idx]
        for start, end in ranges:
            if end > start:
                alloc.free_segment(row[start:end], start_pos=start)

    def cache_unfinished_req(self, req: Req, chunked: bool = False) -> None:
        """0.5.18's name: publish what the running request computed."""
        self.checkpoint(req, up_to=req.kv.kv_committed_len)

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        """0.5.18's name: the request finished (``is_insert``: publish first)."""
        release_kv_cache(req, self, checkpoint=is_insert)

    def _pool(self) -> ReqToTokenPool:
        pool = self.req_to_token_pool
        if not isinstance(pool, ReqToTokenPool):
            raise RequestStateError("this tree has no request-to-token pool")
        return pool

    def _row_of(self, req: Req) -> list[int]:
        pool = self._pool()
        kv = req.kv
        row = kv.req_pool_idx
        if row is None or not 1 <= row <= pool.size or row in pool.free_slots:
            raise RequestStateError(f"{req!r} holds no row")
        if not 0 <= kv.cache_protected_len <= kv.kv_committed_len <= pool.max_context_len:
            raise RequestStateError(f"{req!r}: protected {kv.cache_protected_len}, computed "
                                    f"{kv.kv_committed_len}")
        return pool.req_to_token[row]

    def _check_lock(self, req: Req) -> None:
        lock = req.lock
        if lock is None:
            return
        if not isinstance(lock, TreeLock):
            raise RequestStateError(f"{req!r}: lock {lock!r} is not a tree lock")
        self._check_in_tree(lock.node)
        if lock.node is not self.root_node and lock.node.lock_ref <= 0:
            raise LockUnderflowError(f"{req!r}: its node {lock.node.id} is not locked")

    def evictable_size(self) -> int:
        return self.evictable_size_

    def protected_size(self) -> int:
        return self.protected_size_

    def total_size(self) -> int:
        return self.evictable_size_ + self.protected_size_

    def supports_prefix_sharing(self) -> bool:
        return not self.disable

    def path_device_indices(self, node: TreeNode) -> list[int]:
        """The slots of the tokens from the root to ``node``, in order."""
        self._check_in_tree(node)
        parts: list[list[int]] = []
        while node is not self.root_node:
            parts.append(node.value)
            node = node.parent  # type: ignore[assignment]  # checked in tree
        out: list[int] = []
        for part in reversed(parts):
            out += part
        return out

    def all_values_flatten(self) -> list[int]:
        """Every slot the tree holds (walks the whole tree)."""
        return [slot for node in self._nodes() for slot in node.value]

    def sanity_check(self) -> None:
        """Walk the whole tree and raise SGLangCacheError on a broken invariant: sizes equal
        the tokens held, lock counts are consistent (a parent's ≥ each child's, none
        negative), keys and values page-aligned and of equal length, the candidate set is
        exactly the unlocked leaves, no slot appears twice."""
        evictable = protected = 0
        seen: set[int] = set()
        leaves: set[TreeNode] = set()
        for node in self._nodes():
            parent = node.parent
            if parent is None:
                raise SGLangCacheError(f"{node} has no parent")
            if len(node.key) != len(node.value) or not node.key or \
                    len(node.key) % self.page_size:
                raise SGLangCacheError(f"{node}: key/value lengths {len(node.key)}/"
                                       f"{len(node.value)}")
            if node.lock_ref < 0 or (parent is not self.root_node and
                                     parent.lock_ref < node.lock_ref):
                raise SGLangCacheError(f"{node}: lock counts inconsistent")
            if node.lock_ref:
                protected += len(node.key)
            else:
                evictable += len(node.key)
                if not node.children:
                    leaves.add(node)
            for slot in node.value:
                if slot in seen:
                    raise SGLangCacheError(f"slot {slot} held twice")
                seen.add(slot)
        if (evictable, protected) != (self.evictable_size_, self.protected_size_):
            raise SGLangCacheError(f"sizes {self.evictable_size_}/{self.protected_size_}, "
                                   f"tree holds {evictable}/{protected}")
        if leaves != self.evictable_leaves:
            raise SGLangCacheError("the evictable-leaf set is stale")

    def pretty_print(self) -> None:
        stack: list[tuple[TreeNode, int]] = [(self.root_node, 0)]
        while stack:
            node, indent = stack.pop()
            print(" " * indent, len(node.key), node.key[:10], f"r={node.lock_ref}")
            stack.extend((child, indent + 2) for child in node.children.values())
        print(f"#tokens: {self.total_size()}")

    # ------------------------------------------------------------------ #
    # Internals
    # ------------------------------------------------------------------ #

    def _tokens(self, key: RadixKey) -> list[int]:
        ps = self.page_size
        ids = key.token_ids
        n = len(ids) // ps * ps
        return list(ids[:n]) if n != len(ids) or not isinstance(ids, list) else ids

    def _result(self, node: TreeNode, matched: int, indices: list[int]) -> MatchResult:
        return MatchResult(device_prefix_len=matched, last_device_node=node,
                           last_host_node=node, best_match_node=node, device_indices=indices)

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _child_key(self, node: TreeNode) -> Hashable:
        first: Hashable = node.key[0] if self.page_size == 1 else tuple(
            node.key[:self.page_size])
        return (node.extra_key, first) if node.parent is self.root_node else first

    def _lookup_key(self, tokens: list[int], pos: int, extra_key: str | None,
                    at_root: bool) -> Hashable:
        first: Hashable = tokens[pos] if self.page_size == 1 else tuple(
            tokens[pos:pos + self.page_size])
        return (extra_key, first) if at_root else first

    def _walk(self, tokens: list[int], extra_key: str | None
              ) -> tuple[TreeNode, int, TreeNode | None, int]:
        """Read-only walk: (deepest fully matched node, tokens matched through it, the child
        to split or None, how many of its tokens match)."""
        node, pos, n, ps = self.root_node, 0, len(tokens), self.page_size
        root = node
        while pos < n:
            child = node.children.get(self._lookup_key(tokens, pos, extra_key, node is root))
            if child is None:
                break
            ckey = child.key
            size = len(ckey)
            if pos + size <= n and tokens[pos:pos + size] == ckey:
                node, pos = child, pos + size
                continue
            common = _common_len(ckey, tokens, pos, min(size, n - pos))
            return node, pos, child, common // ps * ps
        return node, pos, None, 0

    def _match(self, tokens: list[int], extra_key: str | None
               ) -> tuple[TreeNode, int, list[list[int]]]:
        node, pos, split_child, split_at = self._walk(tokens, extra_key)
        stamp = self._tick()
        self._stamp_path(node, stamp)
        if split_child is not None:
            node = self._split_touched(split_child, split_at, stamp)
            pos += split_at
        self._refresh(node)
        values: list[list[int]] = []
        x = node
        while x is not self.root_node:
            values.append(x.value)
            x = x.parent  # type: ignore[assignment]  # attached nodes reach the root
        values.reverse()
        return node, pos, values

    def _stamp_path(self, node: TreeNode, stamp: int) -> None:
        while node is not None:
            node.last_access_time = stamp
            node = node.parent  # type: ignore[assignment]

    def _duplicates(self, node: TreeNode, pos: int, split_child: TreeNode | None,
                    split_at: int, value: list[int], prev: int) -> list[int]:
        """The caller's slots at positions [prev, matched) that differ from the tree's."""
        out: list[int] = []
        end = pos + split_at
        if end <= prev:
            return out
        segments: list[tuple[int, list[int]]] = []
        if split_child is not None and split_at:
            segments.append((pos, split_child.value[:split_at]))
        x, start = node, pos
        while x is not self.root_node and start > prev:
            start -= len(x.value)
            segments.append((start, x.value))
            x = x.parent  # type: ignore[assignment]
        for begin, tree_slots in segments:
            for i in range(max(begin, prev), begin + len(tree_slots)):
                if value[i] != tree_slots[i - begin]:
                    out.append(value[i])
        return out

    def _split_touched(self, child: TreeNode, at: int, stamp: int) -> TreeNode:
        """Split ``child`` (``at`` > 0: its first page matched) after stamping it, as the
        walk touched it; the remainder may be an evictable leaf with the new time."""
        child.last_access_time = stamp
        new = self._split(child, at)
        self._refresh(child)
        return new

    def _split(self, child: TreeNode, at: int) -> TreeNode:
        """Cut ``child`` after ``at`` tokens; the new parent takes its lock count."""
        parent = child.parent
        if parent is None:
            raise SGLangCacheError("split of a detached node")
        ck = self._child_key(child)
        new = TreeNode(self._new_id(), parent, child.key[:at], child.value[:at],
                       child.extra_key, child.last_access_time)
        new.lock_ref = child.lock_ref
        child.key = child.key[at:]
        child.value = child.value[at:]
        child.parent = new
        new.children[self._child_key(child)] = child
        parent.children[ck] = new
        return new

    def _refresh(self, node: TreeNode) -> None:
        """Keep ``evictable_leaves`` (and the heap) right for ``node``."""
        if node.lock_ref == 0 and not node.children and node.parent is not None:
            self.evictable_leaves.add(node)
            heap = self._heap
            heapq.heappush(heap, (node.last_access_time, node.id, node))
            if len(heap) > 64 and len(heap) > 4 * len(self.evictable_leaves):
                self._heap = [(x.last_access_time, x.id, x) for x in self.evictable_leaves]
                heapq.heapify(self._heap)
        else:
            self.evictable_leaves.discard(node)

    def _check_in_tree(self, node: Any) -> None:
        if not isinstance(node, TreeNode):
            raise NodeNotInTreeError(f"{node!r} is not a tree node")
        x = node
        while x.parent is not None:
            x = x.parent
        if x is not self.root_node:
            raise NodeNotInTreeError(f"{node!r} is not in this tree (evicted, reset, or "
                                     "another tree's)")

    def _nodes(self) -> Iterator[TreeNode]:
        stack = list(self.root_node.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())


def release_kv_cache(req: Req, tree_cache: RadixCache, *, checkpoint: bool) -> None:
    """Give the request's row back (``sglang.srt.mem_cache.common.release_kv_cache``): with
    ``checkpoint`` (a finish) the tree first keeps its computed tokens; then the row's own part
    ``[cache_protected_len, computed)`` is freed once, the lock released, the row freed
    (a retraction passes ``checkpoint=False``). Raises before any change on a request
    without a row, with a lock that is not live, or owning a slot that is not allocated."""
    tree_cache._row_of(req)
    tree_cache._check_lock(req)
    kv = req.kv
    row = tree_cache._pool().req_to_token[kv.req_pool_idx]  # type: ignore[index]
    alloc = tree_cache.token_to_kv_pool_allocator
    own = row[kv.cache_protected_len:kv.kv_committed_len]
    if alloc is None:
        raise RequestStateError("release_kv_cache needs an allocator")
    if not all(alloc.allocated(slot) for slot in own):
        raise RequestStateError(f"{req!r} owns slots that are not allocated")
    if checkpoint and not tree_cache.disable:
        tree_cache.checkpoint(req, up_to=req.owned_kv_len())
    tree_cache.free_kv_row(kv, [(kv.cache_protected_len, req.owned_kv_len())])
    tree_cache.unlock(req.lock)
    req.lock = None
    tree_cache._pool().free(req)
    kv.kv_committed_len = kv.kv_allocated_len = 0
