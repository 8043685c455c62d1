"""Request keys given as bytes, the empty key, and malformed key builder arguments
(``models.families.v0.request_keys``): key identity, the JSON form of bytes, the model's sharing
rule (a ``str`` salt is its UTF-8 bytes and shares with them; a bytes multimodal hash never shares
with its text), the misuse classification, and the adapter's rendering of a malformed key."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.families.v0 import operations as ops
from models.families.v0.capabilities import Capabilities, Config
from models.families.v0.invariants import Family
from models.families.v0.operations import AllocateImmutable, Dev, ErrorKind, ExtraKey, Malformed
from models.families.v0.oracle import OutOfContract
from models.families.v0.request_keys import KEY_ARGUMENTS, KeyArg, bad_values, well_formed
from prefixcache.hashing import make_extra_hash
from properties.core.calls import render
from properties.core.replay import run_program
from properties.core.targets import load_target
from properties.families.v0.strategies import EXTRA_KEYS, near_misses, same_keys
from tests.model.trace import Trace

F = Family
GPU = Dev.GPU
MISUSE = ErrorKind.MISUSE

# --------------------------------------------------------------------------- identity


@pytest.mark.parametrize("first, second", [
    (ExtraKey(cache_salt="a"), ExtraKey(cache_salt=b"a")),
    (ExtraKey(cache_salt="\u00e9"), ExtraKey(cache_salt=b"\xc3\xa9")),  # UTF-8, not Latin-1
    (ExtraKey(lora_id=1, cache_salt="b"), ExtraKey(lora_id=1, cache_salt=b"b")),
    (ExtraKey(), None),  # the empty key is no key
])
def test_equal_keys_are_one_identity(first: ExtraKey, second: ops.Extra) -> None:
    assert first == second and second == first
    assert hash(first) == hash(second)


@pytest.mark.parametrize("first, second", [
    (ExtraKey(mm_hashes=(b"5",)), ExtraKey(mm_hashes=("5",))),
    (ExtraKey(mm_hashes=(b"5",)), ExtraKey(mm_hashes=(5,))),
    (ExtraKey(cache_salt="\u00e9"), ExtraKey(cache_salt=b"\xe9")),
    (ExtraKey(cache_salt=b""), ExtraKey()),  # an empty salt is a salt
    (ExtraKey(cache_salt=b"a"), ExtraKey(mm_hashes=(b"a",))),
])
def test_different_keys_are_different_identities(first: ExtraKey, second: ExtraKey) -> None:
    assert first != second and first.identity() != second.identity()


def test_bytes_keys_need_the_bytes_capability() -> None:
    assert ExtraKey(cache_salt=b"a").fields_used == {"salt", "bytes"}
    assert ExtraKey(lora_id=1, mm_hashes=(5, b"x")).fields_used == {"lora", "mm", "bytes"}
    assert ExtraKey().fields_used == frozenset()
    oracle = Trace(bs=2, gpu=4, extra_key_fields=frozenset({"lora", "salt"})).oracle
    why = oracle.contract_error(AllocateImmutable(None, (1, 2), GPU, ExtraKey(cache_salt=b"a")))
    assert why is not None and "bytes" in why


@pytest.mark.parametrize("key", [ExtraKey(cache_salt=b"\xff\x00", mm_hashes=(b"", "", 0)),
                                 ExtraKey(cache_salt=b"a"), ExtraKey()])
def test_bytes_round_trip_through_json_with_their_type(key: ExtraKey) -> None:
    op = AllocateImmutable(None, (1, 2), GPU, key)
    back = ops.op_from_json(json.loads(json.dumps(ops.op_to_json(op))))
    assert isinstance(back, AllocateImmutable) and isinstance(back.extra_hash, ExtraKey)
    assert back.extra_hash.cache_salt == key.cache_salt  # bytes stay bytes (not only equal)
    assert type(back.extra_hash.cache_salt) is type(key.cache_salt)
    assert back.extra_hash.mm_hashes == key.mm_hashes


# --------------------------------------------------------------------------- the model


def test_a_str_salt_and_its_bytes_share_a_block() -> None:
    t = Trace(bs=2, gpu=4)
    t.do(AllocateImmutable(None, (1, 2), GPU, ExtraKey(cache_salt="a")), ids=[0], free=3,
         cached=[0])
    t.do(AllocateImmutable(None, (1, 2), GPU, ExtraKey(cache_salt=b"a")), ids=[0], free=3,
         cached=[0])
    apart = Trace(bs=2, gpu=4)
    apart.do(AllocateImmutable(None, (1, 2), GPU, ExtraKey(cache_salt="a")), ids=[0], free=3,
             cached=[0])
    apart.rejects(F.CACHE, AllocateImmutable(None, (1, 2), GPU, ExtraKey(cache_salt=b"a")),
                  ids=[1], free=2, cached=[0, 1])


def test_the_empty_key_shares_with_a_plain_request() -> None:
    t = Trace(bs=2, gpu=4)
    t.do(AllocateImmutable(None, (1, 2), GPU, None), ids=[0], free=3, cached=[0])
    t.do(AllocateImmutable(None, (1, 2), GPU, ExtraKey()), ids=[0], free=3, cached=[0])
    assert t.oracle.hit_candidates(None, GPU, ExtraKey()) == [(1, 2)]


def test_a_bytes_multimodal_hash_never_shares_with_its_text() -> None:
    leaky = Trace(bs=2, gpu=4)
    leaky.do(AllocateImmutable(None, (1, 2), GPU, ExtraKey(mm_hashes=("5",))), ids=[0],
             free=3, cached=[0])
    leaky.rejects(F.HASH, AllocateImmutable(None, (1, 2), GPU, ExtraKey(mm_hashes=(b"5",))),
                  ids=[0], hashes={1: leaky.chain_hash(0)})


# --------------------------------------------------------------------------- malformed keys


LORA_1 = ExtraKey(lora_id=1)


def _key_call(key: ExtraKey = LORA_1) -> AllocateImmutable:
    return AllocateImmutable(None, (1, 2), GPU, key)


@pytest.mark.parametrize("argument", sorted(KEY_ARGUMENTS))
def test_every_bad_value_is_misuse_and_refusing_it_changes_nothing(argument: str) -> None:
    for key in (ExtraKey(lora_id=1), ExtraKey(cache_salt=b"a", mm_hashes=("x",)), ExtraKey()):
        for bad in bad_values(KEY_ARGUMENTS[argument]):
            t = Trace(bs=2, gpu=4)
            op = Malformed(_key_call(key), argument, bad)
            assert t.oracle.is_misuse(op), (key, argument, bad)
            t.do(op, error=MISUSE)
            t.do(_key_call(key), ids=[0], free=3, cached=[0])  # nothing was taken


def test_a_malformed_key_accepted_is_atomic() -> None:
    t = Trace(bs=2, gpu=4)
    t.rejects(F.ATOMIC, Malformed(_key_call(), "extra_hash.lora_id", True), ids=[0])


@pytest.mark.parametrize("arg, good", [
    (KeyArg.LORA_ID, (None, 0, -5, 2**70)),
    (KeyArg.CACHE_SALT, (None, "", b"", "x", b"\xff")),
    (KeyArg.MM_HASHES, ((), (1, "a", b"b"), (2**64,))),
])
def test_valid_values_are_not_misuse(arg: KeyArg, good: tuple[object, ...]) -> None:
    argument = next(name for name, kind in KEY_ARGUMENTS.items() if kind is arg)
    oracle = Trace(bs=2, gpu=4).oracle
    for value in good:
        assert well_formed(arg, value)
        assert "valid" in str(oracle.contract_error(Malformed(_key_call(), argument, value)))
    assert not any(well_formed(arg, bad) for bad in bad_values(arg))


@pytest.mark.parametrize("caps", [
    {"key_builder": False},  # vLLM 0.8: the engine's Sequence.extra_hash, stood in for
    {"extra_keys": False},
])
def test_malformed_keys_need_a_key_builder_of_the_targets_own(caps: dict[str, bool]) -> None:
    oracle = Trace(bs=2, gpu=4, **caps).oracle
    assert not oracle.is_misuse(Malformed(_key_call(), "extra_hash.lora_id", True))


def test_malformed_keys_are_not_fed_to_a_target_without_typed_errors() -> None:
    t = Trace(bs=2, gpu=4, typed_errors=False)
    with pytest.raises(OutOfContract, match="typed"):
        t.do(Malformed(_key_call(), "extra_hash.lora_id", True), error=ErrorKind.ASSERTION)


def test_a_call_without_a_request_key_has_no_key_builder_argument() -> None:
    oracle = Trace(bs=2, gpu=4).oracle
    for extra in (None, 7):
        op = Malformed(AllocateImmutable(None, (1, 2), GPU, extra), "extra_hash.lora_id", True)
        assert not oracle.is_misuse(op)
    assert not oracle.is_misuse(Malformed(ops.Free(0), "extra_hash.lora_id", True))


def test_the_reproducer_shows_the_malformed_key_argument() -> None:
    target = load_target()
    adapter = target.adapter(Config(2, 2, 0, target.caps))
    op = Malformed(_key_call(ExtraKey(lora_id=1, cache_salt="s")), "extra_hash.mm_hashes", "ab")
    text = render(adapter.plan(op, {}).stmts[-1])
    assert "make_extra_hash(lora_id=1, cache_salt='s', mm_hashes='ab')" in text
    assert "malformed extra_hash.mm_hashes" in text
    with pytest.raises(Exception, match="mm_hashes"):
        make_extra_hash(lora_id=1, cache_salt="s", mm_hashes="ab")


def test_vllm_has_no_key_builder_to_malform() -> None:
    target = load_target("properties.upstream:vllm_v0_allocator")
    assert not target.caps.key_builder and target.caps.extra_key_fields == {"lora"}
    adapter = target.adapter(Config(2, 2, 0, target.caps))
    with pytest.raises(Exception, match="key builder"):
        adapter.plan(Malformed(_key_call(), "extra_hash.lora_id", True), {})


# --------------------------------------------------------------------------- strategies


FULL = Capabilities()


@given(st.sampled_from(EXTRA_KEYS), st.data())
def test_respellings_are_equal_and_near_misses_are_not(key: ExtraKey,
                                                       data: st.DataObject) -> None:
    assert data.draw(same_keys(key, FULL)) == key
    assert data.draw(near_misses(key, FULL)) != key
    no_bytes = Capabilities(extra_key_fields=frozenset({"lora", "salt", "mm"}))
    respelled = data.draw(same_keys(key, no_bytes))
    assert respelled is key  # a target without bytes keys gets the key as it is
    miss = data.draw(near_misses(key, no_bytes))
    assert not isinstance(miss, ExtraKey) or "bytes" not in miss.fields_used \
        or "bytes" in key.fields_used


def test_a_program_of_bytes_keys_and_their_respellings_passes_on_the_bundled_allocator() -> None:
    target = load_target()
    keys = [ExtraKey(cache_salt="a"), ExtraKey(cache_salt=b"a"), ExtraKey(cache_salt=b"\xff"),
            ExtraKey(mm_hashes=(b"5",)), ExtraKey(mm_hashes=("5",)), ExtraKey(mm_hashes=(5,)),
            ExtraKey(), None]
    program: list[ops.Op] = [AllocateImmutable(None, (1, 2), GPU, k) for k in keys]
    for argument in sorted(KEY_ARGUMENTS):
        program += [Malformed(_key_call(), argument, bad)
                    for bad in bad_values(KEY_ARGUMENTS[argument])]
    run_program(target, Config(2, 8, 0, target.caps), program)
