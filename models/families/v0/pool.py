"""One device's physical ids, as the contract says they must be.

Every id is in exactly one state: *hashless-free*, *active* (refcount > 0, cached or not) or
*evictable* (refcount 0, still cached). Refcounts count live holders. Cached ids map to exact
content keys (see ``content``), both ways. Active ids carry the tracker fields
(``last_accessed``, ``computed``); evictable ids carry their eviction rank. ``touched`` holds
ids promoted since the last ``mark_blocks_as_computed``, kept only while they stay active
(upstream keeps an id there after it is freed and even re-issued, and would then mark a fresh
mutable block computed; the model does not sanction that).

When KV is written: an id's KV holds its content only once a ``mark_blocks_as_computed``
found it active and touched (the batch that wrote it ran). A cached id released before that
(an abort before the mark) stays cached and evictable but *unwritten*: ``is_computed`` is
false for it, and a hit revives it uncomputed and touched, so the mark after the hit (the
re-request's prefill ran) makes it computed. Eviction or a cache reset forgets the flag. A
mutable block that fills with the content of such an id either is cached under its own id (the
unwritten one becomes hashless) or moves onto it (revived as a hit revives it); the move is a
deviation only when KV already computed into the block's own id (its earlier tokens, before a
mark) is left behind, which the shadow memory judges (``models.core.shadow_memory``).
"""

from __future__ import annotations

from models.families.v0.content import ContentTrie
from models.families.v0.hit_window import HitWindow
from models.families.v0.lru import LruIndex
from models.families.v0.ops.values import Dev

NEVER = -1.0  # upstream's default last_accessed


class Pool:
    __slots__ = (
        "accessed",
        "computed",
        "content_of",
        "dev",
        "evictor",
        "hashless",
        "hits",
        "id_of",
        "ids",
        "queries",
        "refcount",
        "revived",
        "touched",
        "trie",
        "unwritten",
        "upstream",
        "window",
    )

    def __init__(self, dev: Dev, ids: range, trie: ContentTrie, refcount: dict[int, int]) -> None:
        self.dev = dev
        self.ids = ids
        self.trie = trie
        self.refcount = refcount  # shared by both devices: the snapshot's id -> count
        for i in ids:
            refcount[i] = 0
        self.hashless: set[int] = set(ids)
        self.content_of: dict[int, int] = {}  # cached id -> content key
        self.id_of: dict[int, int] = {}  # content key -> cached id
        self.evictor = LruIndex()
        self.accessed: dict[int, float] = {}  # active id -> tracker.last_accessed
        self.computed: set[int] = set()  # active ids whose tracker says computed
        self.touched: set[int] = set()
        self.unwritten: set[int] = set()  # evictable ids whose KV was never computed
        self.revived: set[int] = set()  # touched ids a hit revived from ``unwritten``
        self.hits = 0
        self.queries = 0
        self.window = HitWindow()  # the hit-rate windows of the same queries
        # The same counters as upstream keeps them, swap-ins counted as queries: what a target
        # may show instead while that deviation is tolerated (``models.families.v0.capabilities``).
        self.upstream = _UpstreamCounts()

    def clone(self, refcount: dict[int, int]) -> Pool:
        other = Pool.__new__(Pool)
        other.dev, other.ids, other.trie, other.refcount = self.dev, self.ids, self.trie, refcount
        other.hashless = set(self.hashless)
        other.content_of, other.id_of = dict(self.content_of), dict(self.id_of)
        other.evictor = self.evictor.clone()
        other.accessed, other.computed = dict(self.accessed), set(self.computed)
        other.touched, other.hits, other.queries = set(self.touched), self.hits, self.queries
        other.unwritten, other.revived = set(self.unwritten), set(self.revived)
        other.window = HitWindow(*self.window.fields())
        other.upstream = self.upstream.clone()
        return other

    # ------------------------------------------------------------------ reading

    @property
    def free(self) -> int:
        return len(self.hashless) + len(self.evictor)

    def is_active(self, block_id: int) -> bool:
        return self.refcount.get(block_id, 0) > 0

    def is_computed(self, block_id: int) -> bool:
        """``block_is_computed``: the tracker flag when active, else "is it evictable with
        its KV written"."""
        if self.is_active(block_id):
            return block_id in self.computed
        return block_id in self.evictor and block_id not in self.unwritten

    def cached_active(self, content: int) -> bool:
        block_id = self.id_of.get(content)
        return block_id is not None and self.is_active(block_id)

    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0

    def query(self, hit: bool, count: int = 1, *, admission: bool = True) -> None:
        """``count`` cache queries, each a hit iff ``hit``: the totals and the windows. A
        re-registration that is no ``admission`` (a swap-in) moves the upstream counts only."""
        if admission:
            self.queries += count
            if hit:
                self.hits += count
            self.window.record(hit, count)
        self.upstream.record(hit, count)

    def rate_shown(self, got: float, tolerated: frozenset[str]) -> bool:
        """Whether a shown hit rate is the model's (or, tolerated, upstream's)."""
        if abs(got - self.hit_rate()) <= 1e-9:
            return True
        return "swap_in_queries" in tolerated and abs(got - self.upstream.rate()) <= 1e-9

    def window_shown(self, got: tuple[object, ...], tolerated: frozenset[str]) -> bool:
        """Whether shown window fields are the model's (or, tolerated, upstream's)."""
        if not self.window.differs(got):
            return True
        return "swap_in_queries" in tolerated and not self.upstream.window.differs(got)

    # ------------------------------------------------------------------ transitions

    def _activate(self, block_id: int, computed: bool) -> None:
        self.refcount[block_id] = 1
        self.accessed[block_id] = NEVER
        if computed:
            self.computed.add(block_id)
        else:
            self.computed.discard(block_id)

    def take_hashless(self, block_id: int) -> None:
        self.hashless.remove(block_id)
        self._activate(block_id, computed=False)

    def evict(self, block_id: int) -> None:
        """Hand out an evictable id: its content is forgotten."""
        self.evictor.remove(block_id)
        del self.id_of[self.content_of.pop(block_id)]
        self.touched.discard(block_id)
        self.unwritten.discard(block_id)
        self.revived.discard(block_id)
        self._activate(block_id, computed=False)

    def hit(self, block_id: int) -> None:
        """One more holder of a cached id; an evictable one is revived computed if its KV was
        written, else uncomputed and touched (the next mark, after the re-request's prefill,
        computes it)."""
        if self.is_active(block_id):
            self.refcount[block_id] += 1
            return
        self.evictor.remove(block_id)
        written = block_id not in self.unwritten
        self._activate(block_id, computed=written)
        if not written:
            self.unwritten.discard(block_id)
            self.touched.add(block_id)
            self.revived.add(block_id)

    def incref(self, block_id: int) -> None:
        self.refcount[block_id] += 1

    def cache(self, block_id: int, content: int) -> None:
        """Promotion of new content: cached under this id and touched."""
        self.content_of[block_id] = content
        self.id_of[content] = block_id
        self.touched.add(block_id)

    def release(self, block_id: int) -> None:
        """Drop one holder; at zero a cached id becomes evictable, any other one hashless."""
        count = self.refcount[block_id] - 1
        self.refcount[block_id] = count
        if count:
            return
        last = self.accessed.pop(block_id)
        written = block_id in self.computed
        self.computed.discard(block_id)
        self.touched.discard(block_id)
        self.revived.discard(block_id)
        content = self.content_of.get(block_id)
        if content is None:
            self.hashless.add(block_id)
        else:
            self.evictor.add(block_id, last, self.trie.depth(content))
            if not written:
                self.unwritten.add(block_id)

    def forget(self, block_id: int) -> None:
        """An evictable, unwritten id leaves the cache (a block filling with its content
        is cached under its own id instead): hashless, content forgotten."""
        self.evictor.remove(block_id)
        del self.id_of[self.content_of.pop(block_id)]
        self.unwritten.discard(block_id)
        self.hashless.add(block_id)

    def reset(self) -> None:
        """``reset_prefix_cache`` once nothing is held: every cached id back to hashless."""
        for block_id in list(self.evictor):
            self.hashless.add(block_id)
        self.evictor.clear()
        self.content_of.clear()
        self.id_of.clear()
        self.touched.clear()
        self.unwritten.clear()
        self.revived.clear()
        self.hits = self.queries = 0
        self.window = HitWindow()
        self.upstream = _UpstreamCounts()

    def why_uncomputed(self, block_id: int | None) -> str:
        """A note for a violation where ``block_id`` was reported computed but is not."""
        if block_id in self.revived:
            return (f" (id {block_id} was freed before any mark, its KV never written, and hit "
                    "again before any mark)")
        if block_id in self.unwritten:
            return f" (id {block_id} was freed before any mark: its KV was never written)"
        return ""


class _UpstreamCounts:
    """Hit totals and windows with swap-ins counted (upstream's counters)."""

    __slots__ = ("hits", "queries", "window")

    def __init__(self) -> None:
        self.hits = self.queries = 0
        self.window = HitWindow()

    def clone(self) -> _UpstreamCounts:
        other = _UpstreamCounts()
        other.hits, other.queries = self.hits, self.queries
        other.window = HitWindow(*self.window.fields())
        return other

    def record(self, hit: bool, count: int) -> None:
        self.queries += count
        if hit:
            self.hits += count
        self.window.record(hit, count)

    def rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0
