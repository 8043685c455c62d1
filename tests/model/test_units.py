"""Unit tests of the model's concepts: content identities, the LRU rank, pool states, the
chooser and the shadow memory."""

from __future__ import annotations

from models.core.choice import Chooser
from models.families.v0.content import ROOT, ContentTrie
from models.families.v0.invariants import Family
from models.families.v0.lru import LruIndex
from models.families.v0.operations import Dev
from models.families.v0.pool import NEVER, Pool
from models.families.v0.shadow_memory import ShadowMemory


def test_content_keys_are_exact_prefixes() -> None:
    trie = ContentTrie()
    a = trie.walk(ROOT, (1, 2), None)
    assert trie.walk(ROOT, (1, 2), None) == a  # interned
    assert trie.walk(ROOT, (1, 2), 7)[-1] != a[-1]  # the extra key separates
    assert trie.walk(a[-1], (5, 6), None)[-1] != trie.walk(ROOT, (5, 6), None)[-1]  # prefix
    assert trie.walk(ROOT, (2**61 - 1,), None) != trie.walk(ROOT, (0,), None)  # no hashing
    assert trie.walk(ROOT, (-1,), None) != trie.walk(ROOT, (-2,), None)
    assert trie.depth(a[-1]) == 2
    full = trie.walk(a[-1], (3, 4), 9)[-1]
    assert trie.back(full, 2) == (a[-1], (3, 4), 9)


def test_lru_rank_oldest_then_deepest_with_open_ties() -> None:
    lru = LruIndex()
    assert lru.minimal() == frozenset()
    lru.add(0, 1.0, 4)
    lru.add(1, 1.0, 8)
    lru.add(2, 0.5, 4)
    assert lru.minimal() == {2}
    lru.remove(2)
    assert lru.minimal() == {1}  # same time: most hashed tokens first
    lru.add(3, 1.0, 8)
    assert lru.minimal() == {1, 3}  # remaining ties: any
    lru.touch(1, 9.0)
    assert lru.minimal() == {3}
    lru.remove(3)
    lru.remove(3)  # absent: no-op
    assert lru.minimal() == {0}
    assert len(lru) == 2 and 1 in lru and 3 not in lru


def test_lru_heap_stays_small_under_churn() -> None:
    lru = LruIndex()
    for i in range(1000):
        lru.add(i % 3, float(i), 1)
        lru.remove((i + 1) % 3)
    assert len(lru._heap) <= 2 * len(lru._buckets) + 17


def test_pool_states() -> None:
    refcount: dict[int, int] = {}
    trie = ContentTrie()
    pool = Pool(Dev.GPU, range(3), trie, refcount)
    content = trie.walk(ROOT, (1, 2), None)[-1]
    assert pool.free == 3 and refcount == {0: 0, 1: 0, 2: 0}
    pool.take_hashless(0)
    pool.cache(0, content)
    assert pool.free == 2 and pool.touched == {0} and not pool.is_computed(0)
    pool.accessed[0] = 4.0
    pool.release(0)  # cached: evictable, rank from the tracker
    assert 0 in pool.evictor and pool.evictor.rank(0) == (4.0, -2) and pool.free == 3
    # released before a mark: cached and evictable, but its KV was never written
    assert not pool.is_computed(0) and not pool.touched and pool.unwritten == {0}
    pool.hit(0)  # revived uncomputed and touched: the next mark computes it
    assert pool.is_active(0) and not pool.is_computed(0) and pool.touched == {0}
    assert not pool.unwritten
    pool.computed.update(pool.touched)  # the mark
    pool.touched.clear()
    pool.release(0)
    assert pool.is_computed(0) and not pool.unwritten
    pool.hit(0)  # revived as computed
    assert pool.is_active(0) and pool.is_computed(0) and pool.accessed[0] == NEVER
    pool.release(0)
    pool.evict(0)  # content forgotten
    assert content not in pool.id_of and 0 not in pool.content_of and refcount[0] == 1
    pool.release(0)
    assert 0 in pool.hashless and pool.free == 3


def test_pool_reset_returns_cached_ids() -> None:
    trie = ContentTrie()
    pool = Pool(Dev.CPU, range(5, 7), trie, {})
    pool.take_hashless(5)
    pool.cache(5, trie.walk(ROOT, (1,), None)[-1])
    pool.queries, pool.hits = 2, 1
    pool.release(5)
    pool.reset()
    assert pool.hashless == {5, 6} and not pool.evictor and not pool.id_of
    assert pool.hit_rate() == 0.0


def test_chooser_enumerates_every_path() -> None:
    seen = set()
    stack: list[tuple[int, ...]] = [()]
    while stack:
        chooser = Chooser(stack.pop(), explore=True)
        seen.add((chooser.choose([10, 11]), chooser.choose([20]), chooser.choose([30, 31, 32])))
        stack.extend(chooser.alternatives())
    assert seen == {(a, 20, c) for a in (10, 11) for c in (30, 31, 32)}
    capped = Chooser(explore=True, limit=2)
    capped.choose([1, 2, 3])
    assert capped.pruned and capped.alternatives() == [(1,)]


def test_shadow_memory_copies_writes_and_reads_back() -> None:
    shadow = ShadowMemory(2, 4)
    idents = {10: [5, 6], 11: [5, 6]}
    assert shadow.step(moved={10: 0}, writes={10: 0}, copies=(), swapped=False,
                       expect=idents.__getitem__) == []
    # a second holder of id 0 with the same content: a hit, nothing changes
    assert shadow.step(moved={11: 0}, writes={11: 0}, copies=(), swapped=False,
                       expect=idents.__getitem__) == []
    # a third block writes other content into id 0: CONTENT
    idents[12] = [7, 8]
    found = shadow.step(moved={12: 0}, writes={12: 0}, copies=(), swapped=False,
                        expect=idents.__getitem__)
    assert {v.family for v in found} == {Family.CONTENT}


def test_shadow_memory_flags_a_missing_copy_on_write() -> None:
    shadow = ShadowMemory(4, 2)
    idents = {1: [3], 2: [3]}
    shadow.step(moved={1: 0, 2: 0}, writes={1: 0}, copies=(), swapped=False,
                expect=idents.__getitem__)
    idents[1] = [3, 4, 5]
    found = shadow.step(moved={1: 0}, writes={1: 1}, copies=(), swapped=False,
                        expect=idents.__getitem__)
    assert found and found[0].family is Family.COW
    # with the copy first, the writer's new id gets the prefix and nobody else is touched
    shadow = ShadowMemory(4, 2)
    idents = {1: [3], 2: [3]}
    shadow.step(moved={1: 0, 2: 0}, writes={1: 0}, copies=(), swapped=False,
                expect=idents.__getitem__)
    idents[1] = [3, 4]
    assert shadow.step(moved={1: 1}, writes={1: 1}, copies=[(0, 1)], swapped=False,
                       expect=idents.__getitem__) == []


def test_shadow_memory_swap_copies_each_block_to_its_new_id() -> None:
    shadow = ShadowMemory(1, 4)
    idents = {1: [9], 2: [8]}
    shadow.step(moved={1: 0, 2: 1}, writes={1: 0, 2: 0}, copies=(), swapped=False,
                expect=idents.__getitem__)
    ok = shadow.step(moved={1: 2, 2: 3}, writes={}, copies=(), swapped=True,
                     expect=idents.__getitem__)
    assert ok == []
    bad = shadow.step(moved={1: 3}, writes={}, copies=(), swapped=True,
                      expect=idents.__getitem__)  # lands on the id block 2 still holds
    assert Family.SWAP in {v.family for v in bad}


def test_shadow_memory_learns_computed_kv_at_each_mark() -> None:
    """Slots hold valid KV only after ``compute`` (the batch ran) found a live holder;
    claims on unwritten or reused ids, and a move to an id without that KV, are flagged."""
    shadow = ShadowMemory(2, 3)
    want = {1: [11, 12], 2: [11, 12]}

    def expect(key: int) -> list[int]:
        return want[key]

    def step(moved: dict[int, int | None], writes: dict[int, int]) -> list[str]:
        found = shadow.step(moved=moved, writes=writes, copies=(), swapped=False, expect=expect)
        return [v.family.value for v in found]

    assert step({1: 0}, {1: 0}) == []
    assert [v.family for v in shadow.check_claims("q", [(0, 0, want[1])])] == [Family.COMPUTED]
    shadow.compute(expect)
    assert shadow.check_claims("q", [(0, 0, want[1])]) == []
    assert step({1: None}, {}) == []  # freed: the KV stays valid in id 0
    assert shadow.check_claims("q", [(0, 0, want[1])]) == []
    want[2] = [11]
    assert step({2: 1}, {2: 0}) == []  # a decoding block at id 1, its first token computed
    shadow.compute(expect)
    want[2] = [11, 12]
    assert step({2: 0}, {2: 1}) == []  # onto id 0, which holds that KV
    shadow.valid[2] = 0
    want[2] = [11]
    assert step({2: 2}, {2: 0}) == []
    shadow.compute(expect)
    want[2] = [11, 12]
    shadow.slots[1] = [11, 12]
    shadow.valid[1] = 0  # cached content nobody computed
    assert step({2: 1}, {2: 1}) == ["CONTENT"]  # its computed first token stays in id 2
