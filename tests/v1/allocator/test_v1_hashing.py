"""Block hashing of the v1 reference: the chain, the request hasher, extra-key isolation (LoRA,
cache salt, multimodal inputs, prompt embeds), lookahead hashing and the canonical encoding."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import prefixcache.v1.core.kv_cache_utils as kcu
from prefixcache.errors import InvalidArgumentError
from prefixcache.v1.core.kv_cache_utils import (
    BlockHash,
    BlockHashListWithBlockSize,
    get_block_hash,
    get_group_id,
    get_mm_features_in_window,
    hash_block_tokens,
    init_none_hash,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
    resolve_block_hashes,
    to_event_extra_keys,
)
from prefixcache.v1.hashing import canonical_bytes, get_hash_fn_by_name, sha256

from ._support import FakeFeature, FakeLoRA, FakePosition, FakeRequest


def test_chain_is_hash_of_parent_tokens_and_extra_keys() -> None:
    req = FakeRequest("r", list(range(10)), 4)
    assert len(req.block_hashes) == 2
    first = sha256((kcu.NONE_HASH, (0, 1, 2, 3), None))
    assert req.block_hashes[0] == first
    assert req.block_hashes[1] == sha256((first, (4, 5, 6, 7), None))
    assert hash_block_tokens(sha256, None, [0, 1, 2, 3]) == first
    assert hash_block_tokens(sha256, BlockHash(b""), [0, 1, 2, 3]) == first


def test_hasher_is_incremental() -> None:
    whole = FakeRequest("a", list(range(23)), 4)
    grown = FakeRequest("b", [0], 4)
    for token in range(1, 23):
        grown.append([token])
    assert grown.block_hashes == whole.block_hashes and len(whole.block_hashes) == 5


def _hashes(**kwargs: Any) -> list[BlockHash]:
    return FakeRequest("r", [5] * 8, 4, **kwargs).block_hashes


def test_extra_keys_isolate_requests() -> None:
    plain = _hashes()
    assert plain == _hashes()
    variants = {
        "lora a/1": _hashes(lora_request=FakeLoRA("a", 1, "/p")),
        "lora a/2 same name and path": _hashes(lora_request=FakeLoRA("a", 2, "/p")),
        "lora a/1 other path": _hashes(lora_request=FakeLoRA("a", 1, "/q")),
        "lora b/1": _hashes(lora_request=FakeLoRA("b", 1, "/p")),
        "salt x": _hashes(cache_salt="x"),
        "salt y": _hashes(cache_salt="y"),
        "mm i@2": _hashes(mm_features=[FakeFeature("i", FakePosition(2, 3))]),
        "mm j@2": _hashes(mm_features=[FakeFeature("j", FakePosition(2, 3))]),
        "mm i@1": _hashes(mm_features=[FakeFeature("i", FakePosition(1, 3))]),
        "embeds 0": _hashes(prompt_embeds=bytes(8)),
        "embeds 1": _hashes(prompt_embeds=bytes([1]) + bytes(7)),
    }
    seen = {tuple(plain): "plain"}
    for name, hashes in variants.items():
        for block_hash in hashes:
            assert block_hash not in plain, name
        assert tuple(hashes) not in seen, (name, seen.get(tuple(hashes)))
        seen[tuple(hashes)] = name


def test_salt_only_in_the_first_block_but_the_chain_carries_it() -> None:
    req = FakeRequest("r", [5] * 8, 4, cache_salt="s")
    assert req.block_hashes[0] == sha256((kcu.NONE_HASH, (5,) * 4, (("cache_salt", "s"),)))
    assert req.block_hashes[1] == sha256((req.block_hashes[0], (5,) * 4, None))


def test_multimodal_keys_carry_offsets_within_each_block() -> None:
    feats = [FakeFeature("a", FakePosition(3, 6)), FakeFeature("b", FakePosition(10, 2))]
    req = FakeRequest("r", [0] * 12, 4, mm_features=feats)
    h0 = sha256((kcu.NONE_HASH, (0,) * 4, (("mm", "a", 3),)))
    h1 = sha256((h0, (0,) * 4, (("mm", "a", -1),)))
    h2 = sha256((h1, (0,) * 4, (("mm", "a", -5), ("mm", "b", 2))))  # a ends at token 8
    assert req.block_hashes == [h0, h1, h2]
    grown = FakeRequest("g", [0] * 5, 4, mm_features=feats)
    grown.append([0] * 7)
    assert grown.block_hashes == req.block_hashes


def test_lookahead_hash_waits_for_and_covers_the_successor_tokens() -> None:
    req = FakeRequest("r", [1, 2, 3, 4], 4, lookahead=1)
    assert req.block_hashes == []
    req.append([9])
    assert req.block_hashes == [sha256((kcu.NONE_HASH, (1, 2, 3, 4), (None, 9)))]
    other = FakeRequest("o", [1, 2, 3, 4, 8], 4, lookahead=1)
    assert other.block_hashes != req.block_hashes


def test_hash_function_must_return_bytes() -> None:
    with pytest.raises(InvalidArgumentError):
        hash_block_tokens(hash, None, [1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        init_none_hash(lambda obj: 0)  # type: ignore[arg-type, return-value]
    with pytest.raises(InvalidArgumentError):
        sha256((object(),))
    assert get_hash_fn_by_name("sha256") is sha256
    with pytest.raises(ValueError):
        get_hash_fn_by_name("xxhash")


def test_none_hash_follows_pythonhashseed(monkeypatch: pytest.MonkeyPatch) -> None:
    original = kcu.NONE_HASH
    try:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
        init_none_hash(sha256)
        assert kcu.NONE_HASH == original == sha256(kcu.DEFAULT_NONE_HASH_SEED)
        monkeypatch.setenv("PYTHONHASHSEED", "7")
        init_none_hash(sha256)
        assert sha256("7") == kcu.NONE_HASH and kcu.get_none_hash_seed() == "7"
    finally:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
        init_none_hash(sha256)


def test_keys_pack_hash_and_group() -> None:
    key = make_block_hash_with_group_id(BlockHash(b"abc"), 258)
    assert get_block_hash(key) == b"abc" and get_group_id(key) == 258
    with pytest.raises(OverflowError):
        make_block_hash_with_group_id(BlockHash(b"abc"), -1)


def test_event_hash_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    digest = BlockHash(bytes(range(32)))
    assert maybe_convert_block_hash(digest) == int.from_bytes(digest[-8:], "big")
    monkeypatch.setenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "0")
    assert maybe_convert_block_hash(digest) == digest


def test_event_extra_keys_are_untagged() -> None:
    keys = (("lora", "a", "/p", 1), ("mm", "i", 2), ("cache_salt", "s"))
    assert to_event_extra_keys([keys, None]) == [("a", ("i", 2), "s"), None]
    assert to_event_extra_keys([]) is None


def test_coarse_view_of_fine_hashes() -> None:
    fine = [BlockHash(bytes([i])) for i in range(7)]
    view = BlockHashListWithBlockSize(fine, 2, 6)
    assert len(view) == 2 and list(view) == [fine[2], fine[5]]
    assert view[-1] == fine[5] and view[0:2] == [fine[2], fine[5]]
    with pytest.raises(IndexError):
        view[2]
    assert resolve_block_hashes(fine, 2, 2) is fine
    assert (
        resolve_block_hashes(fine, 2, 6, supports_fine_grained_hash_lookup=True, alignment_tokens=2)
        is fine
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 20), st.integers(1, 5)), max_size=5),
    st.integers(0, 25),
    st.integers(1, 6),
)
def test_mm_window_matches_brute_force(
    spans: list[tuple[int, int]], start: int, width: int
) -> None:
    feats, offset = [], 0
    for gap, length in spans:  # sorted, non-overlapping
        offset += gap
        feats.append(FakeFeature(str(offset), FakePosition(offset, length)))
        offset += length
    lo, hi = get_mm_features_in_window(feats, start, start + width)
    overlapping = [
        i
        for i, f in enumerate(feats)
        if f.mm_position.offset < start + width
        and start < f.mm_position.offset + f.mm_position.length
    ]
    assert list(range(lo, hi)) == overlapping


VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=4)
    | st.binary(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple),
    max_leaves=12,
)


def _tagged(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_tagged(v) for v in value))
    if isinstance(value, float) and math.copysign(1, value) < 0 and value == 0:
        return ("float", "-0.0")
    return (type(value).__name__, value)


@settings(max_examples=500, deadline=None)
@given(VALUES, VALUES)
def test_canonical_encoding_is_injective(a: Any, b: Any) -> None:
    assert (canonical_bytes(a) == canonical_bytes(b)) == (_tagged(a) == _tagged(b))
