"""The FULL + SWA radix prefix cache (``sglang.srt.mem_cache.swa_radix_cache``), standard
library only: ``SWARadixCache(CacheInitParams(..., sliding_window_size=W))`` over a
:class:`~prefixcache.sglang.srt.mem_cache.swa_allocator.SWATokenToKVPoolAllocator`.

Names and calls mirror SGLang's (``match_prefix``, ``insert``, ``evict(EvictParams(num_tokens,
swa_num_tokens))``, ``inc_lock_ref``/``dec_lock_ref``/``lock``/``unlock``,
``full_``/``swa_evictable_size``, ``full_``/``swa_protected_size``). Values are the tokens' full
slots; a token's SWA KV is its full slot's peer in the allocator's mapping.

Contract (``docs/CONTRACT.md``, SGLang, FULL + SWA):

* **Window.** A request reads the full KV of every prefix token and the SWA KV of its last
  ``W`` tokens only. The tree may drop (*tombstone*) a token's SWA KV and keep its full KV.
* **Match.** ``match_prefix`` returns the longest cached prefix whose last ``W`` tokens (all of
  them, for a shorter prefix) hold SWA KV: a match ending in a tombstoned stretch is cut back.
  Tombstones are kept per token, so the cut is exact.
* **Locks.** A lock holds the full KV of its node's whole path and the SWA KV of the path's
  last ``W`` tokens (exactly those: a per-token SWA lock count). Locking a node whose window
  is tombstoned raises :class:`~prefixcache.sglang.errors.TombstonedWindowError`; unlocking
  below zero :class:`~prefixcache.sglang.errors.LockUnderflowError`; both change nothing.
  ``release_swa(lock)`` (``dec_swa_lock_only``) releases a lock's window early, keeping its
  full lock; ``unlock`` then releases the full lock only; a second ``release_swa`` of one
  lock raises :class:`~prefixcache.sglang.errors.LockUnderflowError`.
* **Insert.** Adopts the value's tail past what the tree held; a caller's duplicate of a token
  whose SWA KV the tree holds is freed whole (full slot and SWA peer); for a tombstoned token
  the tree keeps its own full slot (a running request may read it) and adopts the caller's
  SWA peer, freeing the caller's full slot only.
* **Eviction.** ``num_tokens``: unlocked leaves, least recently used first, whole (full and
  SWA KV freed together). Then ``swa_num_tokens``: nodes least recently used first, each
  dropping the SWA KV of its tokens outside every lock's window, until enough is freed. Each
  slot is freed once; ``EvictResult`` reports both counts.
* **Sizes.** ``evictable_size``/``protected_size`` count the tree's tokens by full lock;
  ``swa_evictable_size``/``swa_protected_size`` its tokens holding SWA KV outside / inside
  the locks' windows. Computed by walking the tree (a reference, not a fast path).
* **Failure atomicity.** Every call checks its arguments before it changes anything.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from prefixcache.sglang.errors import (
    InvalidArgumentError,
    LockUnderflowError,
    NodeNotInTreeError,
    ReceiptMismatchError,
    SGLangCacheError,
    TombstonedWindowError,
)
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
from prefixcache.sglang.srt.mem_cache.radix_cache import RadixKey
from prefixcache.sglang.srt.mem_cache.swa_allocator import SWATokenToKVPoolAllocator

__all__ = ["RadixKey", "SWARadixCache", "SWATreeNode"]

#: What the tree calls on its allocator (an SWATokenToKVPoolAllocator, by its interface).
_SWA_ALLOCATOR = ("alloc", "free", "free_full", "free_swa", "set_full_to_swa_mapping",
                  "clear_full_to_swa_mapping", "translate_loc_from_full_to_swa",
                  "full_to_swa_index_mapping", "full_attn_allocator")


class SWATreeNode:
    """A run of tokens, their full slots, and per token: whether its SWA KV is held
    (``swa_live``) and how many locks' windows hold it (``swa_lock``)."""

    __slots__ = ("children", "extra_key", "id", "key", "last_access_time", "lock_ref",
                 "parent", "swa_live", "swa_lock", "value")

    def __init__(self, node_id: int, parent: SWATreeNode | None, key: list[int],
                 value: list[int], extra_key: str | None, stamp: int,
                 swa_live: list[bool]) -> None:
        self.children: dict[Hashable, SWATreeNode] = {}
        self.parent = parent
        self.key = key
        self.value = value
        self.extra_key = extra_key
        self.lock_ref = 0
        self.swa_live = swa_live
        self.swa_lock = [0] * len(key)
        self.last_access_time = stamp
        self.id = node_id

    def __repr__(self) -> str:
        return f"SWATreeNode(id={self.id}, len={len(self.key)}, lock_ref={self.lock_ref})"


class SWARadixCache:
    """See the module docstring."""

    def __init__(self, params: CacheInitParams) -> None:
        window = params.sliding_window_size
        if not isinstance(window, int) or window < 1:
            raise InvalidArgumentError(f"sliding_window_size must be a positive int, got "
                                       f"{window!r}")
        if params.page_size != 1:
            raise InvalidArgumentError(f"SWARadixCache runs at page size 1, got "
                                       f"{params.page_size!r}")
        alloc: SWATokenToKVPoolAllocator = params.token_to_kv_pool_allocator  # type: ignore[assignment]
        if not all(hasattr(alloc, name) for name in _SWA_ALLOCATOR):
            raise InvalidArgumentError("SWARadixCache needs an SWATokenToKVPoolAllocator")
        self.disable = params.disable
        self.token_to_kv_pool_allocator = alloc
        self.page_size = 1
        self.sliding_window_size = window
        self.device = "cpu"
        self.reset()

    def reset(self) -> None:
        self._next_id = 1
        self._clock = 0
        self.root_node = SWATreeNode(0, None, [], [], None, 0, [])
        self.root_node.lock_ref = 1

    # ------------------------------------------------------------------ match and insert

    def match_prefix(self, params: MatchPrefixParams) -> MatchResult:
        """The longest cached prefix whose window holds SWA KV, and its full slots."""
        key = params.key
        tokens = list(key.token_ids)
        if self.disable or not tokens:
            return self._result(self.root_node, [])
        usable = self._usable(tokens, key.extra_key)
        node = self._reach(tokens[:usable], key.extra_key)
        return self._result(node, self.path_device_indices(node))

    def insert(self, params: InsertParams) -> InsertResult:
        """Add ``params.key`` with full slots ``params.value`` (see the module docstring)."""
        if self.disable:
            return InsertResult(prefix_len=0)
        key = params.key
        if key is None or params.value is None:
            raise InvalidArgumentError("insert needs a key and a value")
        tokens = list(key.token_ids)
        n = len(tokens)
        if len(params.value) < n:
            raise InvalidArgumentError(f"value has {len(params.value)} slots for {n} tokens")
        value = list(params.value[:n])
        prev = params.prev_prefix_len
        if not isinstance(prev, int) or prev < 0:
            raise InvalidArgumentError(f"prev_prefix_len must be a non-negative int, got "
                                       f"{prev!r}")
        if n == 0:
            return InsertResult(prefix_len=0, total_len=0, last_device_node=self.root_node)  # type: ignore[arg-type]
        alloc = self.token_to_kv_pool_allocator
        held = self._held(tokens, key.extra_key)
        matched = len(held)
        mine = [i for i in range(prev, matched) if value[i] != held[i][0].value[held[i][1]]]
        given = [value[i] for i in mine] + value[matched:]
        if len(set(given)) != len(given):
            raise InvalidArgumentError("a slot appears twice in the value")
        bad = [s for s in given if not alloc.full_attn_allocator.allocated(s)]
        if bad:
            raise InvalidArgumentError(f"insert: slots {bad[:8]} are not allocated")
        peers = alloc.translate_loc_from_full_to_swa(given)
        # Mutate: duplicates first (on the unsplit nodes), then the split and the tail.
        whole, recover = [], []
        for i in mine:
            node, at = held[i]
            if node.swa_live[at] or not alloc.full_to_swa_index_mapping[value[i]]:
                whole.append(value[i])
            else:
                recover.append(i)
        for i in recover:
            node, at = held[i]
            alloc.set_full_to_swa_mapping([node.value[at]],
                                          [alloc.full_to_swa_index_mapping[value[i]]])
            alloc.clear_full_to_swa_mapping([value[i]])
            node.swa_live[at] = True
        if recover:
            alloc.free_full([value[i] for i in recover])
        if whole:
            alloc.free(whole)
        node = self._reach(tokens[:matched], key.extra_key)
        if matched < n:
            tail = peers[len(mine):]
            leaf = SWATreeNode(self._new_id(), node, tokens[matched:], value[matched:],
                               key.extra_key, self._clock, [bool(p) for p in tail])
            node.children[self._child_key(leaf)] = leaf
            node = leaf
        return InsertResult(prefix_len=matched, total_len=n,
                            last_device_node=node)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ eviction

    def evict(self, params: EvictParams) -> EvictResult:
        """Full eviction of ``num_tokens``, then SWA eviction of ``swa_num_tokens``."""
        num, swa_num = params.num_tokens, params.swa_num_tokens
        for name, n in (("num_tokens", num), ("swa_num_tokens", swa_num)):
            if not isinstance(n, int) or n < 0:
                raise InvalidArgumentError(f"{name} must be a non-negative int, got {n!r}")
        result = EvictResult()
        if self.disable:
            return result
        alloc = self.token_to_kv_pool_allocator
        while result.num_tokens_evicted < num:
            leaves = [x for x in self._nodes() if x.lock_ref == 0 and not x.children]
            if not leaves:
                break
            victim = min(leaves, key=lambda x: (x.last_access_time, x.id))
            parent = victim.parent
            if parent is None:  # unreachable: _nodes yields attached nodes
                raise SGLangCacheError("a leaf without a parent")
            del parent.children[self._child_key(victim)]
            victim.parent = None
            alloc.free(victim.value)
            result.evicted_indices += victim.value
            result.num_tokens_evicted += len(victim.value)
            result.swa_num_tokens_evicted += sum(victim.swa_live)
        while result.swa_num_tokens_evicted < swa_num:
            found = [(x.last_access_time, x.id, x) for x in self._nodes()
                     if any(live and not lock for live, lock in zip(x.swa_live, x.swa_lock,
                                                                    strict=True))]
            if not found:
                break
            node = min(found, key=lambda t: (t[0], t[1]))[2]
            drop = [i for i, (live, lock) in enumerate(zip(node.swa_live, node.swa_lock,
                                                           strict=True)) if live and not lock]
            alloc.free_swa([node.value[i] for i in drop])
            for i in drop:
                node.swa_live[i] = False
            result.swa_num_tokens_evicted += len(drop)
        return result

    # ------------------------------------------------------------------ locks

    def inc_lock_ref(self, node: SWATreeNode) -> IncLockRefResult:
        """Lock ``node``'s path (full) and its last ``W`` tokens (SWA)."""
        self._check_in_tree(node)
        if self.disable or node is self.root_node:
            return IncLockRefResult(delta=0, node_id=node.id)
        window = self._window(node)
        if not all(x.swa_live[i] for x, i in window):
            raise TombstonedWindowError(f"{node}: its window lost SWA KV (a stale match)")
        delta = 0
        x = node
        while x is not self.root_node:
            if x.lock_ref == 0:
                delta -= len(x.key)
            x.lock_ref += 1
            x = x.parent  # type: ignore[assignment]  # checked: the chain reaches the root
        for x, i in window:
            x.swa_lock[i] += 1
        return IncLockRefResult(delta=delta, node_id=node.id)

    def dec_lock_ref(self, node: SWATreeNode, params: DecLockRefParams | None = None,
                     skip_swa: bool = False) -> DecLockRefResult:
        """Release one lock of ``node`` (full path, and its window unless ``skip_swa``: the
        window was released already); raises before any change on a foreign node, another
        node's receipt, or a count at 0."""
        self._check_receipt(node, params)
        if self.disable or node is self.root_node:
            return DecLockRefResult(delta=0)
        window = [] if skip_swa else self._window(node)
        if node.lock_ref <= 0 or not all(x.swa_lock[i] > 0 for x, i in window):
            raise LockUnderflowError(f"{node} is not locked")
        delta = 0
        x = node
        while x is not self.root_node:
            x.lock_ref -= 1
            if x.lock_ref == 0:
                delta += len(x.key)
            x = x.parent  # type: ignore[assignment]
        for x, i in window:
            x.swa_lock[i] -= 1
        return DecLockRefResult(delta=delta)

    def dec_swa_lock_only(self, node: SWATreeNode, params: DecLockRefParams | None = None
                          ) -> None:
        """Release only the window of one lock of ``node`` (its full lock stays): a request
        whose decoding has passed the window. The window's SWA KV becomes evictable unless
        another lock's window holds it."""
        self._check_receipt(node, params)
        if self.disable or node is self.root_node:
            return
        window = self._window(node)
        if node.lock_ref <= 0 or not all(x.swa_lock[i] > 0 for x, i in window):
            raise LockUnderflowError(f"{node}'s window is not locked")
        for x, i in window:
            x.swa_lock[i] -= 1

    def lock(self, node: SWATreeNode) -> TreeLock:
        return TreeLock(node, self.inc_lock_ref(node).to_dec_params())  # type: ignore[arg-type]

    def unlock(self, lock: TreeLock | None) -> None:
        if lock is not None:
            self.dec_lock_ref(lock.node, lock.receipt,  # type: ignore[arg-type]
                              skip_swa=lock.swa_released)

    def release_swa(self, lock: TreeLock | None) -> None:
        """``dec_swa_lock_only`` of ``lock``, once: a second call raises
        :class:`~prefixcache.sglang.errors.LockUnderflowError` and changes nothing (a caller
        that releases a window twice has lost track of its lock)."""
        if lock is None:
            return
        if lock.swa_released:
            raise LockUnderflowError(f"the window of {lock.node}'s lock was released already")
        self.dec_swa_lock_only(lock.node, lock.receipt)  # type: ignore[arg-type]
        lock.swa_released = True

    def _check_receipt(self, node: SWATreeNode, params: DecLockRefParams | None) -> None:
        if params is not None and params.node_id is not None and params.node_id != node.id:
            raise ReceiptMismatchError(f"receipt of node {params.node_id} used to unlock "
                                       f"node {node.id}")
        self._check_in_tree(node)

    # ------------------------------------------------------------------ sizes

    def _count(self, locked: bool) -> int:
        return sum(len(x.key) for x in self._nodes() if (x.lock_ref > 0) == locked)

    def _swa_count(self, locked: bool) -> int:
        return sum(1 for x in self._nodes() for live, lock in zip(x.swa_live, x.swa_lock,
                                                                  strict=True)
                   if live and (lock > 0) == locked)

    def evictable_size(self) -> int:
        return self._count(False)

    def protected_size(self) -> int:
        return self._count(True)

    def total_size(self) -> int:
        return self._count(False) + self._count(True)

    def full_evictable_size(self) -> int:
        return self._count(False)

    def full_protected_size(self) -> int:
        return self._count(True)

    def swa_evictable_size(self) -> int:
        return self._swa_count(False)

    def swa_protected_size(self) -> int:
        return self._swa_count(True)

    def supports_swa(self) -> bool:
        return True

    def path_device_indices(self, node: SWATreeNode) -> list[int]:
        self._check_in_tree(node)
        parts: list[list[int]] = []
        while node is not self.root_node:
            parts.append(node.value)
            node = node.parent  # type: ignore[assignment]
        return [s for part in reversed(parts) for s in part]

    def sanity_check(self) -> None:
        """Raise SGLangCacheError when a token's SWA state and the allocator's mapping
        disagree, a window lock sits on a tombstone, or a slot is held twice."""
        mapping = self.token_to_kv_pool_allocator.full_to_swa_index_mapping
        seen: set[int] = set()
        for x in self._nodes():
            for slot, live, lock in zip(x.value, x.swa_live, x.swa_lock, strict=True):
                if slot in seen or bool(mapping[slot]) != live or (lock and not live):
                    raise SGLangCacheError(f"{x}: slot {slot} inconsistent")
                seen.add(slot)

    # ------------------------------------------------------------------ internals

    def _result(self, node: SWATreeNode, indices: list[int]) -> MatchResult:
        return MatchResult(device_prefix_len=len(indices), last_device_node=node,  # type: ignore[arg-type]
                           last_host_node=node, best_match_node=node,  # type: ignore[arg-type]
                           device_indices=indices)

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _child_key(self, node: SWATreeNode) -> Hashable:
        return (node.extra_key, node.key[0]) if node.parent is self.root_node else node.key[0]

    def _held(self, tokens: list[int], extra_key: str | None) -> list[tuple[SWATreeNode, int]]:
        """Read only: (node, offset) of each cached token of ``tokens``' path."""
        out: list[tuple[SWATreeNode, int]] = []
        node = self.root_node
        while len(out) < len(tokens):
            first = tokens[len(out)]
            child = node.children.get((extra_key, first) if node is self.root_node else first)
            if child is None:
                break
            start = len(out)
            for i, tok in enumerate(child.key):
                if start + i >= len(tokens) or tokens[start + i] != tok:
                    return out
                out.append((child, i))
            node = child
        return out

    def _usable(self, tokens: list[int], extra_key: str | None) -> int:
        held = self._held(tokens, extra_key)
        w = self.sliding_window_size
        for end in range(len(held), 0, -1):
            if all(x.swa_live[i] for x, i in held[max(0, end - w):end]):
                return end
        return 0

    def _reach(self, tokens: list[int], extra_key: str | None) -> SWATreeNode:
        """The node ending exactly after ``tokens`` (all cached), splitting one if needed;
        stamps the path with a fresh time."""
        self._clock += 1
        node, pos = self.root_node, 0
        while pos < len(tokens):
            first = tokens[pos]
            child = node.children[(extra_key, first) if node is self.root_node else first]
            child.last_access_time = self._clock
            if pos + len(child.key) > len(tokens):
                child = self._split(child, len(tokens) - pos)
            node, pos = child, pos + len(child.key)
        return node

    def _split(self, child: SWATreeNode, at: int) -> SWATreeNode:
        parent = child.parent
        if parent is None:
            raise SGLangCacheError("split of a detached node")
        ck = self._child_key(child)
        new = SWATreeNode(self._new_id(), parent, child.key[:at], child.value[:at],
                          child.extra_key, child.last_access_time, child.swa_live[:at])
        new.lock_ref = child.lock_ref
        new.swa_lock = child.swa_lock[:at]
        child.key, child.value = child.key[at:], child.value[at:]
        child.swa_live, child.swa_lock = child.swa_live[at:], child.swa_lock[at:]
        child.parent = new
        new.children[self._child_key(child)] = child
        parent.children[ck] = new
        return new

    def _window(self, node: SWATreeNode) -> list[tuple[SWATreeNode, int]]:
        """(node, offset) of the last ``W`` tokens of ``node``'s path."""
        out: list[tuple[SWATreeNode, int]] = []
        x = node
        while x is not self.root_node and len(out) < self.sliding_window_size:
            for i in range(len(x.key) - 1, -1, -1):
                if len(out) == self.sliding_window_size:
                    break
                out.append((x, i))
            x = x.parent  # type: ignore[assignment]
        return out

    def _check_in_tree(self, node: Any) -> None:
        if not isinstance(node, SWATreeNode):
            raise NodeNotInTreeError(f"{node!r} is not a tree node")
        x = node
        while x.parent is not None:
            x = x.parent
        if x is not self.root_node:
            raise NodeNotInTreeError(f"{node!r} is not in this tree")

    def _nodes(self) -> Iterator[SWATreeNode]:
        stack = list(self.root_node.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())
