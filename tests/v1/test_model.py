"""The v1 model: queue order, key map with duplicates and aliases, reset, events, keys."""

from __future__ import annotations

import pytest

from models.core.invariants import Violation
from models.families.v1 import ops
from models.families.v1.events import Replay
from models.families.v1.invariants import Family
from models.families.v1.keys import check_keys
from models.families.v1.pool_model import ModelCaps, Observed, PoolConfig, PoolModel

H = [bytes([i]) * 4 for i in range(8)]  # hash-block hashes of one request


def model(**caps: bool) -> PoolModel:
    return PoolModel(PoolConfig(num_blocks=6, hash_block_size=2, group_block_sizes=(2, 4)),
                     ModelCaps(**caps))


def test_free_order_lru_chain_tail_first_and_unhashed_to_front() -> None:
    m = model()
    ids = m.get_new_blocks(3)
    m.cache_full_blocks(H, ids, 0, 2, 0)
    m.free_blocks(list(reversed(ids)))
    assert m.free == [3, 4, 5, 2, 1]  # unhashed 3 first; hashed chain tail 2 before 1
    old = model(unhashed_free_to_front=False)
    ids = old.get_new_blocks(3)
    old.cache_full_blocks(H, ids, 0, 2, 0)
    old.free_blocks(list(reversed(ids)))
    assert old.free == [4, 5, 3, 2, 1]


def test_get_new_blocks_drops_keys_and_refuses_too_many() -> None:
    m = model()
    ids = m.get_new_blocks(5)
    m.cache_full_blocks(H, ids, 0, 1, 0)
    m.free_blocks([ids[0]])
    with pytest.raises(ValueError):
        m.get_new_blocks(2)
    assert m.lookup(H[0], [0]) == [[1]]
    assert m.get_new_blocks(1) == [1] and m.lookup(H[0], [0]) is None and m.ref[1] == 1


def test_duplicates_and_eviction() -> None:
    m = model()
    a, b = m.get_new_blocks(1), m.get_new_blocks(1)
    m.cache_full_blocks(H, a, 0, 1, 0)
    m.cache_full_blocks(H, b, 0, 1, 0)
    assert m.lookup(H[0], [0]) == [[1, 2]]
    m.evict_blocks([1])
    assert m.lookup(H[0], [0]) == [[2]] and 1 not in m.primary
    assert m.lookup(H[0], [0, 1]) is None  # a miss in any group is a miss


def test_partial_then_full_promotion_drops_the_partial_key() -> None:
    m = model()
    (b,) = m.get_new_blocks(1)
    assert m.cache_partial_block(H, b, 2, 1) == (H[0], 1)
    m.cache_full_blocks(H, [b], 0, 1, 1)  # group 1: 4 tokens, the second hash
    assert m.lookup(H[0], [1]) is None and m.lookup(H[1], [1]) == [[b]]


def test_masked_and_null_blocks_are_not_keyed() -> None:
    m = model()
    ids = [0, *m.get_new_blocks(3)]
    m.cache_full_blocks(H, ids, 0, 4, 0, mask=(True, True, False, True))
    assert sorted(m.primary) == [1, 3] and m.lookup(H[2], [0]) is None


def test_reset_only_when_nothing_in_use() -> None:
    m = model()
    ids = m.get_new_blocks(1)
    m.cache_full_blocks(H, ids, 0, 1, 0)
    assert not m.reset_prefix_cache() and m.keys
    m.free_blocks(ids)
    assert m.reset_prefix_cache() and not m.keys


def test_compare_names_the_family() -> None:
    m = model()
    good = Observed(ref=dict(m.ref), free=list(m.free), primary=dict.fromkeys(m.ref),
                    num_free=5, usage=0.0)
    m.compare(good)
    for bad, family in [
        (Observed({**good.ref, 1: 1}, good.free, good.primary, 5, 0.0), Family.RC),
        (Observed(good.ref, good.free[1:], good.primary, 5, 0.0), Family.LEAK),
        (Observed(good.ref, list(reversed(good.free)), good.primary, 5, 0.0), Family.LRU),
        (Observed(good.ref, good.free, good.primary, 4, 0.0), Family.FREE),
        (Observed(good.ref, good.free, {**good.primary, 2: (H[0], 0)}, 5, 0.0), Family.CACHE),
    ]:
        with pytest.raises(Violation) as info:
            m.compare(bad)
        assert info.value.family is family


class _Ev:
    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)


class BlockStored(_Ev):
    pass


class BlockRemoved(_Ev):
    pass


def test_event_replay_is_the_key_set() -> None:
    replay = Replay()
    replay.apply([BlockStored(block_hashes=[H[0]], group_idx=0),
                  BlockStored(block_hashes=[H[0]], group_idx=0)])
    replay.check({(H[0], 0): [1, 2]})
    replay.apply([BlockRemoved(block_hashes=[H[0]], group_idx=0)])
    with pytest.raises(Violation, match="event replay"):
        replay.check({(H[0], 0): [2]})  # one copy left: the router must still hold the key
    with pytest.raises(Violation, match="does not hold"):
        Replay().apply([BlockRemoved(block_hashes=[H[1]], group_idx=0)])
    with pytest.raises(Violation, match="parent"):
        Replay().apply([BlockStored(block_hashes=[H[2]], parent_block_hash=H[1], group_idx=0)])
    Replay().apply([BlockStored(block_hashes=[H[2]], parent_block_hash=H[1], group_idx=0)],
                   unannounceable={H[1]})


@pytest.mark.parametrize("field,a,b", [("lora", 1, 2), ("salt", "x", None),
                                       ("mm", (("i", 0, 2),), (("i", 1, 1),)),
                                       ("embeds", b"\0\0", b"\0\1")])
def test_keys_different_inputs_never_share(field: str, a: object, b: object) -> None:
    r1 = ops.Req(tokens=(1, 1), **{field: a})  # type: ignore[arg-type]
    r2 = ops.Req(tokens=(1, 1), **{field: b})  # type: ignore[arg-type]
    check_keys([r1, r2], [[H[0]], [H[1]]], 2)
    with pytest.raises(Violation) as info:
        check_keys([r1, r2], [[H[0]], [H[0]]], 2)
    assert info.value.family is Family.HASH


def test_keys_with_lookahead_cover_the_tokens_after_the_block() -> None:
    """With hash lookahead L, a block is keyed once its L next tokens exist, and requests equal
    in a block but not in the next L tokens never share its key (equal ones should)."""
    a, b = ops.Req(tokens=(1, 1, 0, 2)), ops.Req(tokens=(1, 1, 0, 1))
    check_keys([a, b], [[H[0], H[1]], [H[0], H[2]]], 2)  # without: block 0 shared
    with pytest.raises(Violation) as info:
        check_keys([a, b], [[H[0]], [H[0]]], 2, lookahead=2)  # block 0's lookahead differs
    assert info.value.family is Family.HASH
    check_keys([a, b], [[H[0]], [H[1]]], 2, lookahead=2)
    check_keys([a, b], [[H[0]], [H[0]]], 2, lookahead=1)  # the next token agrees
    with pytest.raises(Violation) as info:  # (4 - 1) // 2 keys: block 1 lacks its lookahead
        check_keys([a, b], [[H[0], H[1]], [H[0], H[2]]], 2, lookahead=1)
    assert info.value.family is Family.HASH


def test_keys_equal_prefixes_should_share() -> None:
    r = ops.Req(tokens=(1, 1, 2, 2))
    with pytest.raises(Violation) as info:
        check_keys([r, ops.Req(tokens=(1, 1))], [[H[0], H[1]], [H[2]]], 2)
    assert info.value.family is Family.HIT


def test_program_json_round_trip() -> None:
    program = [ops.Req(tokens=(1, 2), lora=1, mm=(("i", 0, 1),), embeds=b"\1\2"),
               ops.GetNew(2), ops.CacheFull(0, (1, 2), 0, 1, 0), ops.Lookup(0, 0, (0, 1)),
               ops.Free((2, 1)), ops.Reset(), ops.TakeEvents(), ops.Evict((1,)),
               ops.CachePartial(0, 1, 2, 1), ops.Touch((1,))]
    assert [ops.from_json(r) for r in ops.program_json(program)] == program


def test_writable_is_one_holder_and_no_key() -> None:
    m = model()
    (a,) = m.get_new_blocks(1)
    free = {b: False for b in m.ref if b != a}
    ok = Observed(dict(m.ref), list(m.free), dict.fromkeys(m.ref), m.num_free, m.usage,
                  writable={**free, a: True})
    m.compare(ok)  # handed out, unhashed: its holder may write it in place
    m.compare(Observed(ok.ref, ok.free, ok.primary, ok.num_free, ok.usage))  # not offered
    with pytest.raises(Violation, match="is_block_writable") as info:
        m.compare(Observed(ok.ref, ok.free, ok.primary, ok.num_free, ok.usage,
                           writable={**free, a: False}))
    assert info.value.family is Family.CACHE
    m.touch([a])  # a second holder: no longer writable
    with pytest.raises(Violation, match="is_block_writable"):
        m.compare(Observed(dict(m.ref), list(m.free), dict.fromkeys(m.ref), m.num_free,
                           m.usage, writable={**free, a: True}))
