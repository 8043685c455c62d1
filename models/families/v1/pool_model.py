"""Executable model of the BlockPool contract (vLLM v1), the v1 family's specification.

State: per non-null block its reference count; the free queue as an ordered list (head is
evicted first); the key map ``(hash, group) -> blocks`` in insertion order (several blocks may
share a key: duplicates); per block its primary key (with the token count it covers) and its
alias keys (partial-block entries of a block that already has a primary key).

Contract (what an engine relies on; release differences are :class:`ModelCaps`):

* ``get_new_blocks(n)`` refuses ``n`` above the free count with ``ValueError`` and no change;
  otherwise it hands out the ``n`` queue-head blocks, each with ``ref_cnt == 1``, no key, not
  the null block, off the queue; every key a popped block held is dropped first.
* ``touch`` takes a block off the queue when its count was 0 and counts one more reference;
  ``free_blocks`` counts one fewer; at 0 the block re-enters the queue: blocks with a key at
  the tail in the order given (LRU: the engine passes a request's blocks reversed, so the
  chain tail is evicted first), blocks without one at the head (``unhashed_free_to_front``)
  or, in releases without that rule, at the tail too. The null block is skipped by both.
* the map holds exactly the keys given by ``cache_full_blocks``/``cache_partial_block`` and
  not yet dropped by eviction, ``evict_blocks`` or reset; ``get_cached_block`` answers one
  block holding the key per group, or None when any group misses.
* ``reset_prefix_cache`` succeeds (True) only when no block but the null block is in use,
  and then drops every key; otherwise False and no change.
* the free count is the queue length; usage is ``1 - free / (num_blocks - 1)``.
* ``free_blocks(.., evict_first=True)`` (0.34) queues every released block at the head, keyed
  or not (another tier holds its contents); with caching off (``enable_caching=False``) every
  released block goes to the head.
* ``unpin_blocks`` counts one fewer reference like ``free_blocks`` but queues a block reaching
  0 at the tail, keyed or not (a last-resort eviction: its reader still reads it), and
  registers the caller's ``on_reuse`` for it; ``on_reuse`` fires exactly once per registered
  block, when ``get_new_blocks`` hands it out again or the cache is reset (a missed call leaves
  a reader on overwritten KV).
* ``move_block_hashes(src, dst)`` re-points every key of ``src`` to the keyless ``dst`` (its
  private copy); the key set, and so the events, do not change; ``src`` ends keyless.
* ``cache_partial_block(.., replace_existing_hashes=True)`` (0.33) drops every key of the block
  (primary and aliases, deeper or shallower) before keying it at ``num_tokens``: its KV is now
  exactly that prefix's, and an old key would serve it for another one; without the flag a
  deeper key replaces the block's keys and a shallower one joins them as an alias.
* ``emit_cached_block_events`` changes no state; what it announces must be keys the map holds
  (checked through the event replay).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from models.core.invariants import FREE_COUNT_ERROR, FREE_QUEUE_ERROR, Measure, Violation
from models.families.v1.invariants import Family

Key = tuple[bytes, int]  # (block hash, kv cache group id)
NULL = 0


@dataclass(frozen=True, slots=True)
class ModelCaps:
    """Release differences the contract allows (detected from the target's API)."""

    unhashed_free_to_front: bool = True
    partial_blocks: bool = True
    evict_blocks: bool = True
    hash_block_size: bool = True


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """Pool shape: ``group_block_sizes[g]`` is a multiple of ``hash_block_size``."""

    num_blocks: int = 8
    hash_block_size: int = 2
    group_block_sizes: tuple[int, ...] = (2, 4)
    events: bool = True
    caching: bool = True  # ``enable_caching``
    #: ``num_hash_lookahead_tokens`` (speculative decoding): a block's key also covers the
    #: next ``lookahead`` tokens of its request, so a block is keyed only once they exist.
    lookahead: int = 0

    def scale(self, group: int) -> int:
        return self.group_block_sizes[group] // self.hash_block_size


@dataclass
class PoolModel:
    """The model state; each method applies one operation the way the contract says."""

    config: PoolConfig
    caps: ModelCaps = field(default_factory=ModelCaps)
    ref: dict[int, int] = field(init=False)
    free: list[int] = field(init=False)
    keys: dict[Key, list[int]] = field(init=False, default_factory=dict)
    primary: dict[int, tuple[Key, int]] = field(init=False, default_factory=dict)
    aliases: dict[int, set[Key]] = field(init=False, default_factory=dict)
    #: blocks unpinned with an ``on_reuse`` still to fire (insertion ordered)
    watchers: dict[int, None] = field(init=False, default_factory=dict)
    #: the ``on_reuse`` calls due since the executor last compared them
    fired: list[int] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        ids = range(1, self.config.num_blocks)
        self.ref = dict.fromkeys(ids, 0)
        self.free = list(ids)

    # ------------------------------------------------------------------ queries
    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def usage(self) -> float:
        total = self.config.num_blocks - 1
        return 0.0 if not total else 1.0 - self.num_free / total

    def keys_of(self, block: int) -> list[Key]:
        out = [self.primary[block][0]] if block in self.primary else []
        return out + sorted(self.aliases.get(block, ()))

    def lookup(self, hash_: bytes, groups: Sequence[int]) -> list[list[int]] | None:
        """Per group, the blocks any of which is a correct answer; None on any miss."""
        out = []
        for g in groups:
            holders = self.keys.get((hash_, g))
            if not holders:
                return None
            out.append(list(holders))
        return out

    def in_use(self) -> int:
        return sum(1 for r in self.ref.values() if r > 0)

    # ------------------------------------------------------------------ key map
    def _drop_keys(self, block: int) -> list[Key]:
        dropped = []
        for key in self.keys_of(block):
            holders = self.keys.get(key, [])
            if block in holders:
                holders.remove(block)
                dropped.append(key)
                if not holders:
                    del self.keys[key]
        self.primary.pop(block, None)
        self.aliases.pop(block, None)
        return dropped

    def _insert(self, key: Key, block: int, num_tokens: int) -> None:
        if block in self.keys.get(key, ()):
            return
        if block not in self.primary:
            self.primary[block] = (key, num_tokens)
        else:
            self.aliases.setdefault(block, set()).add(key)
        self.keys.setdefault(key, []).append(block)

    # ------------------------------------------------------------------ operations
    def get_new_blocks(self, n: int) -> list[int]:
        """The ids handed out; ``ValueError`` (no change) when ``n`` exceeds the free count."""
        if n > self.num_free:
            raise ValueError(f"cannot get {n} blocks, {self.num_free} free")
        taken, self.free = self.free[:n], self.free[n:]
        for b in taken:
            self._drop_keys(b)
            self.ref[b] = 1
            if b in self.watchers:
                del self.watchers[b]
                self.fired.append(b)
        return taken

    def touch(self, ids: Sequence[int]) -> None:
        for b in ids:
            if b == NULL:
                continue
            if self.ref[b] == 0:
                self.free.remove(b)
            self.ref[b] += 1

    def free_blocks(self, ids: Sequence[int], evict_first: bool = False) -> None:
        front: list[int] = []
        back: list[int] = []
        first = evict_first or not self.config.caching
        for b in ids:
            if b == NULL:
                continue
            self.ref[b] -= 1
            if self.ref[b] == 0:
                to_front = first or b not in self.primary
                (front if to_front and self.caps.unhashed_free_to_front else back).append(b)
        self.free = front + self.free + back

    def unpin_blocks(self, ids: Sequence[int]) -> None:
        """The caller never passes the null block or a block it does not hold."""
        for b in ids:
            self.ref[b] -= 1
            self.watchers[b] = None
            if self.ref[b] == 0:
                self.free.append(b)

    def move_block_hashes(self, src: int, dst: int) -> None:
        """``dst`` is keyless and not ``src`` (the caller's precondition)."""
        if src not in self.primary:
            return
        for key in self.keys_of(src):
            holders = self.keys[key]
            holders.remove(src)
            holders.append(dst)
        self.primary[dst] = self.primary.pop(src)
        aliases = self.aliases.pop(src, None)
        if aliases:
            self.aliases[dst] = aliases

    def cache_full_blocks(self, hashes: Sequence[bytes], ids: Sequence[int], num_cached: int,
                          num_full: int, group: int,
                          mask: Sequence[bool] | None = None) -> None:
        """``hashes``: the request's hash-block-granularity hashes; masked-out blocks (False)
        are skipped like null blocks."""
        size = self.config.group_block_sizes[group]
        scale = self.config.scale(group)
        for i in range(num_cached, num_full):
            b = ids[i]
            if b == NULL or (mask is not None and not mask[i - num_cached]):
                continue
            key = (hashes[(i + 1) * scale - 1], group)
            tokens = (i + 1) * size
            if b in self.primary and self.primary[b][0] != key:
                self._drop_keys(b)  # partial -> full promotion of the same block
            self._insert(key, b, tokens)

    def cache_partial_block(self, hashes: Sequence[bytes], block: int, num_tokens: int,
                            group: int, replace: bool = False) -> Key | None:
        """``replace`` (``replace_existing_hashes``): the block's contents were overwritten, so
        every key it held goes, whatever prefix it covered, before the new one is its primary."""
        if block == NULL:
            return None
        key = (hashes[num_tokens // self.config.hash_block_size - 1], group)
        if replace:
            self._drop_keys(block)
        cached = block in self.keys.get(key, ())
        if not cached and block in self.primary and self.primary[block][1] < num_tokens:
            self._drop_keys(block)
        self._insert(key, block, num_tokens)
        return key

    def evict_blocks(self, ids: Sequence[int]) -> None:
        for b in ids:
            self._drop_keys(b)

    def reset_prefix_cache(self) -> bool:
        if self.in_use():
            return False
        self.keys.clear()
        self.primary.clear()
        self.aliases.clear()
        self.fired.extend(self.watchers)
        self.watchers.clear()
        return True

    # ------------------------------------------------------------------ comparison
    def compare(self, observed: Observed) -> None:
        """Raise the first :class:`Violation` between the model and a target snapshot."""
        for b, r in self.ref.items():
            if observed.ref.get(b) != r:
                raise Violation(Family.RC, f"block {b}: ref_cnt", expected=r,
                                observed=observed.ref.get(b))
        if sorted(observed.free) != sorted(self.free) or len(observed.free) != len(self.free):
            error = len(set(observed.free) ^ set(self.free)) + abs(
                len(observed.free) - len(set(observed.free)))
            raise Violation(Family.LEAK, "free queue membership", expected=sorted(self.free),
                            observed=observed.free, measure=Measure(FREE_QUEUE_ERROR, error))
        if observed.free != self.free:
            raise Violation(Family.LRU, "free queue order (head is evicted first)",
                            expected=self.free, observed=observed.free)
        if observed.num_free != self.num_free:
            raise Violation(Family.FREE, "get_num_free_blocks()", expected=self.num_free,
                            observed=observed.num_free,
                            measure=Measure(FREE_COUNT_ERROR,
                                            abs(observed.num_free - self.num_free)))
        if abs(observed.usage - self.usage) > 1e-9:
            raise Violation(Family.FREE, "get_usage()", expected=self.usage,
                            observed=observed.usage)
        for b in self.ref:
            want = self.primary.get(b, (None, 0))[0]
            if observed.primary.get(b) != want:
                raise Violation(Family.CACHE, f"block {b}: block_hash", expected=want,
                                observed=observed.primary.get(b))
        if observed.writable is not None:
            for b, r in self.ref.items():
                # In place only for its one holder, and only while no key promises its content.
                want_w = r == 1 and not self.keys_of(b)
                if observed.writable.get(b) != want_w:
                    raise Violation(Family.CACHE, f"block {b}: is_block_writable()",
                                    expected=want_w, observed=observed.writable.get(b))


@dataclass(frozen=True, slots=True)
class Observed:
    """A target snapshot: refcounts, free queue (head first), primary keys, counters, and
    ``is_block_writable`` per block where the target has it (0.34; None: it has not)."""

    ref: dict[int, int]
    free: list[int]
    primary: dict[int, Key | None]
    num_free: int
    usage: float
    writable: dict[int, bool] | None = None
