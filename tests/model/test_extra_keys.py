"""Request keys (``ExtraKey``) through the vocabulary: the value type and its JSON form, the
model's isolation rule (equal keys share, different keys and no key never do), the contract
gate on the fields a target folds in, and the adapter's rendering for the bundled allocator
and vLLM 0.8. The machines drive the same keys against every target."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.families.v0 import operations as ops
from models.families.v0.capabilities import Capabilities, Config
from models.families.v0.invariants import Family
from models.families.v0.operations import AllocateImmutable, Dev, ExtraKey, TableAllocate
from prefixcache.hashing import make_extra_hash
from properties.core.calls import eval_expr, render_expr
from properties.core.replay import run_program
from properties.core.targets import load_target
from properties.families.v0.strategies import EXTRA_KEYS, extra_hashes, near_misses
from tests.model.trace import Trace

F = Family
GPU = Dev.GPU
LORA_ONLY = Capabilities(extra_key_fields=frozenset({"lora"}))


# --------------------------------------------------------------------------- the value


@pytest.mark.parametrize("fields", [
    {"lora_id": 0},  # an engine's "no LoRA"
    {"lora_id": -1},
    {"lora_id": True},
    {"cache_salt": 5},
    {"cache_salt": bytearray(b"x")},  # not hashable: ops must stay hashable
    {"mm_hashes": [1]},  # a list is not hashable: ops must stay hashable
    {"mm_hashes": (1.5,)},
    {"mm_hashes": (True,)},
])
def test_extra_key_rejects_keys_that_do_not_name_one_request(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="ExtraKey"):
        ExtraKey(**fields)  # type: ignore[arg-type]


def test_extra_key_reports_the_fields_it_uses() -> None:
    assert ExtraKey(lora_id=3).fields_used == {"lora"}
    assert ExtraKey(cache_salt="", mm_hashes=("a",)).fields_used == {"salt", "mm"}


@given(st.sampled_from(EXTRA_KEYS), st.sampled_from((None, 0, -1, 2**70)))
def test_ops_with_extra_keys_round_trip_through_json(key: ExtraKey, raw: int | None) -> None:
    for op in (AllocateImmutable(None, (1, 2), GPU, key),
               ops.AllocateImmutableChain(0, ((1,), (2,)), Dev.CPU, key),
               TableAllocate((1, 2, 3), GPU, key, window=2),
               ops.HitBurst(0, 3, GPU, key),
               ops.Malformed(AllocateImmutable(None, (1, 2), GPU, key), "tokens", ("x",)),
               AllocateImmutable(None, (1, 2), GPU, raw)):
        text = json.dumps(ops.op_to_json(op))
        assert ops.op_from_json(json.loads(text)) == op


def test_json_from_before_extra_keys_still_decodes_and_bad_keys_do_not() -> None:
    old = {"op": "allocate_immutable", "prev": None, "tokens": [1], "device": "gpu",
           "extra_hash": 7}
    assert ops.op_from_json(old) == AllocateImmutable(None, (1,), GPU, 7)
    for bad in ({"lora_id": 1, "adapter": 2}, {"cache_salt": 5}, True, "salt", 1.5,
                {"cache_salt": {"hex": "61"}}, {"mm_hashes": [{"bytes": 5}]}):
        with pytest.raises(ValueError):
            ops.op_from_json({**old, "extra_hash": bad})


# --------------------------------------------------------------------------- the model


def test_equal_keys_share_a_cached_block() -> None:
    t = Trace(bs=2, gpu=4)
    t.do(AllocateImmutable(None, (1, 2), GPU, ExtraKey(1, "a")), ids=[0], free=3, cached=[0])
    t.do(AllocateImmutable(None, (1, 2), GPU, ExtraKey(1, "a")), ids=[0], free=3, cached=[0])
    assert t.oracle.hit_candidates(None, GPU, ExtraKey(1, "a")) == [(1, 2)]
    assert t.oracle.hit_candidates(None, GPU, ExtraKey(1, "b")) == []
    assert t.oracle.hit_candidates(None, GPU, None) == []


@pytest.mark.parametrize("first, second", [
    (ExtraKey(1, "a"), ExtraKey(1, "b")),  # same LoRA, other salt
    (ExtraKey(1, "a"), ExtraKey(1)),  # salted against unsalted
    (ExtraKey(cache_salt="a", mm_hashes=(5,)), ExtraKey(cache_salt="a", mm_hashes=("5",))),
    (ExtraKey(cache_salt="a"), None),  # a salted request against a plain one
    (ExtraKey(lora_id=1), 1),  # a key against a raw int extra_hash
])
def test_different_keys_never_share(first: ops.Extra, second: ops.Extra) -> None:
    honest = Trace(bs=2, gpu=4)
    honest.do(AllocateImmutable(None, (1, 2), GPU, first), ids=[0], free=3, cached=[0])
    honest.do(AllocateImmutable(None, (1, 2), GPU, second), ids=[1], free=2, cached=[0, 1])
    leaky = Trace(bs=2, gpu=4)
    leaky.do(AllocateImmutable(None, (1, 2), GPU, first), ids=[0], free=3, cached=[0])
    leaky.rejects(F.HASH, AllocateImmutable(None, (1, 2), GPU, second), ids=[0],
                  hashes={1: leaky.chain_hash(0)})


def test_a_table_keeps_its_key_for_the_blocks_it_fills() -> None:
    key = ExtraKey(lora_id=2, mm_hashes=(-3,))
    t = Trace(bs=2, gpu=4)
    t.do(TableAllocate((1, 2, 3), GPU, key), table=(0, 1), free=2, cached=[0])
    assert t.oracle.hit_candidates(None, GPU, key) == [(1, 2)]
    assert t.oracle.hit_candidates(None, GPU, ExtraKey(lora_id=2)) == []


def test_keys_beyond_the_target_are_out_of_contract() -> None:
    oracle = Trace(bs=2, gpu=4, extra_key_fields=frozenset({"lora"})).oracle
    assert oracle.contract_error(AllocateImmutable(None, (1, 2), GPU, ExtraKey(1))) is None
    why = oracle.contract_error(AllocateImmutable(None, (1, 2), GPU, ExtraKey(1, "a")))
    assert why is not None and "salt" in why
    assert oracle.contract_error(TableAllocate((1,), GPU, ExtraKey(mm_hashes=(1,)))) is not None


# --------------------------------------------------------------------------- strategies


@given(st.data())
def test_strategies_draw_only_keys_the_target_folds_in(data: st.DataObject) -> None:
    extra = data.draw(extra_hashes(LORA_ONLY))
    assert not isinstance(extra, ExtraKey) or extra.fields_used <= {"lora"}
    miss = data.draw(near_misses(extra, LORA_ONLY))
    assert miss != extra and isinstance(miss, ExtraKey) and miss.fields_used == {"lora"}
    full = Capabilities()
    key = data.draw(st.sampled_from(EXTRA_KEYS))
    other = data.draw(near_misses(key, full))
    assert other != key and len(_differing(key, other)) == 1


def _differing(a: ExtraKey, b: ExtraKey) -> list[str]:
    return [f for f in ("lora_id", "cache_salt", "mm_hashes") if getattr(a, f) != getattr(b, f)]


# --------------------------------------------------------------------------- adapters


def _extra_arg(spec: str | None, key: ExtraKey) -> tuple[str, object]:
    target = load_target(spec)
    adapter = target.adapter(Config(2, 2, 2, target.caps))
    call = adapter.plan(AllocateImmutable(None, (1, 2), GPU, key), {}).stmts[0].expr
    assert not isinstance(call, ops.Op) and hasattr(call, "kwargs")
    expr = dict(call.kwargs)["extra_hash"]
    return render_expr(expr), eval_expr(expr, adapter.env())


def test_the_bundled_allocator_gets_make_extra_hash_of_the_key() -> None:
    key = ExtraKey(1, "a", (5, "img"))
    text, value = _extra_arg(None, key)
    assert "make_extra_hash(lora_id=1, cache_salt='a', mm_hashes=[5, 'img'])" in text
    assert value == make_extra_hash(lora_id=1, cache_salt="a", mm_hashes=(5, "img"))
    assert load_target().caps.extra_key_fields == {"lora", "salt", "mm", "bytes"}


def test_vllm_gets_its_sequence_extra_hash_and_lora_only() -> None:
    target = load_target("properties.upstream:vllm_v0_allocator")
    assert target.caps.extra_key_fields == {"lora"}
    text, value = _extra_arg("properties.upstream:vllm_v0_allocator", ExtraKey(3))
    assert "sequence_extra_hash(lora_int_id=3)" in text
    assert value == hash((0, 3))
    with pytest.raises(Exception, match="salt"):
        _extra_arg("properties.upstream:vllm_v0_allocator", ExtraKey(3, "a"))


@pytest.mark.parametrize("spec", [None, "properties.upstream:vllm_v0_allocator"])
def test_a_program_of_near_miss_keys_passes_on_a_correct_target(spec: str | None) -> None:
    target = load_target(spec)
    keys = [k for k in EXTRA_KEYS if k.fields_used <= target.caps.extra_key_fields]
    program: list[ops.Op] = []
    for key in (None, *keys, *keys):  # each key twice: the second request hits
        program.append(AllocateImmutable(None, (1, 2), GPU, key))
    run_program(target, Config(2, 2 * len(keys) + 2, 0, target.caps), program)
