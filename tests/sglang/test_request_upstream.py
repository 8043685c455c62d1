"""Upstream SGLang at the request level (:mod:`properties.families.sglang.request_driver`):
the wheel's own ``ReqToTokenPool`` and ``ReqKvInfo`` are what runs, and each stand-in the
request path needs cannot change what the suite observes (the ``Req`` stand-in, the memory
saver, ``get_spec`` / ``get_serving``, 0.5.18's ``alloc_extend`` through ``alloc``); a request's
life conforms on every release and core."""

from __future__ import annotations

from typing import Any

import pytest

from models.families.sglang.ops import Evict, TreeConfig
from properties.core.targets import load_target
from properties.families.sglang import stand_ins
from properties.families.sglang import upstream as sgl
from properties.families.sglang.family import FAMILY, REF
from properties.families.sglang.request_driver import LegacyReq, Req, pool_classes
from properties.families.sglang.requests import Admit, Chunk, Complete, Decode, Preempt, Resume

NEW, OLD = sgl.DEFAULT_VERSION, sgl.CLASSIC_VERSION
needs_new = pytest.mark.skipif(sgl.unavailable_reason(NEW) is not None,
                               reason=str(sgl.unavailable_reason(NEW)))
needs_old = pytest.mark.skipif(sgl.unavailable_reason(OLD) is not None,
                               reason=str(sgl.unavailable_reason(OLD)))
TARGETS = [pytest.param("properties.upstream:sglang_request_radix_cache", marks=needs_new),
           pytest.param("properties.upstream:sglang_request_radix_cache_rust", marks=needs_new),
           pytest.param("properties.upstream:sglang_classic_request_radix_cache",
                        marks=needs_new),
           pytest.param("properties.upstream:sglang_v0518_request_radix_cache",
                        marks=needs_old)]


@pytest.mark.parametrize("spec", TARGETS)
@pytest.mark.parametrize("page_size", [1, 2])
def test_a_request_life_conforms(spec: str, page_size: int) -> None:
    """Shared prefixes, a chunk refused under pressure, a preemption and a resumption on
    what was published, decode steps, finishes; every slot comes back."""
    target = load_target(spec, family=REF)
    assert target.caps.requests and not target.caps.tree
    ps = page_size
    judge = FAMILY.judge(target, TreeConfig(6, ps))

    def t(*tokens: int) -> tuple[int, ...]:
        return tuple(x for x in tokens for _ in range(ps))

    def prefill(req: int) -> None:
        request: Any = judge.model.requests[req]
        while request.computed < len(request.tokens):
            assert judge.step(Chunk(req, ps)) is not None

    judge.step(Admit(t(1, 2)))
    judge.step(Chunk(0, ps))
    judge.step(Admit(t(1, 3, 3, 3, 3)))
    prefill(0)
    judge.step(Decode(0, 5))
    assert judge.step(Chunk(1, 4 * ps)) is None  # the rest is locked: refused
    judge.step(Preempt(0))
    prefill(1)
    assert judge.step(Resume(0)).matched == 2 * ps  # its prompt, published by its chunks
    judge.step(Decode(1, 1))
    judge.step(Complete(1))
    prefill(0)  # evicts request 1's unlocked outputs
    judge.step(Decode(0, 2))
    judge.step(Complete(0))
    judge.step(Evict(100))
    assert judge.tree.available_size() == judge.config.size


@needs_new
def test_the_pool_and_the_kv_record_are_the_wheels_own_classes() -> None:
    mods = sgl.load_sglang(version=NEW)
    pool_cls, kv_cls = pool_classes(mods.origin)
    assert pool_cls.__init__.__code__.co_filename.endswith("sglang/srt/mem_cache/memory_pool.py")
    assert kv_cls is not None and kv_cls.swa_dead_lo.__code__.co_filename.endswith(
        "sglang/srt/managers/schedule_batch.py")
    pool = pool_cls(4, 8, "cpu", False)
    assert pool.available_size() == 4 and tuple(pool.req_to_token.shape) == (5, 8)
    with pytest.raises(ValueError):  # the memory saver stand-in: off, as upstream's default
        pool_cls(4, 8, "cpu", True)


@needs_new
def test_the_req_stand_in_has_only_the_fields_it_sets() -> None:
    """A field the cache would read that the stand-in does not set is an AttributeError,
    never a silent default."""
    _, kv_cls = pool_classes(sgl.load_sglang(version=NEW).origin)
    req = Req("r", [1, 2], None, kv_cls())
    assert req.owned_kv_len() == 0 and not req.finished()
    for missing in ("sampling_params", "return_logprob", "multimodal_inputs", "host_hit_length"):
        with pytest.raises(AttributeError):
            getattr(req, missing)
    req.output_ids.append(3)
    req.refresh_fill_ids()
    assert list(req.full_untruncated_fill_ids) == [1, 2, 3]


def test_the_release_paths_runtime_context_stand_ins_answer_only_the_defaults() -> None:
    values = stand_ins.VALUE_STAND_INS["sglang.srt.runtime_context"]
    spec: Any = values["get_spec"].value
    serving: Any = values["get_serving"].value
    assert spec().speculative_algorithm is None
    assert serving().strip_thinking_cache is False
    for read in (lambda: spec().num_draft_tokens, lambda: serving().enable_cache_report):
        with pytest.raises(AttributeError):
            read()


@needs_new
@needs_old
def test_0518s_alloc_extend_through_alloc_gives_0523s_slots() -> None:
    """Where the allocator has only triton kernels (0.5.18) the driver takes the rest of the
    row's last page and whole pages through ``alloc``: the slots 0.5.23's CPU
    ``alloc_extend`` hands out from the same free list."""
    new = load_target("properties.upstream:sglang_request_radix_cache", family=REF)
    old = load_target("properties.upstream:sglang_v0518_request_radix_cache", family=REF)
    rows: list[list[int]] = []
    for target in (new, old):
        tree = target.factory(16, 4)
        assert tree.extends == (target is new)
        req = tree.req_open(list(range(12)), None)
        tree.req_admit(req)
        row = [*tree.req_extend(req, 3), *tree.req_extend(req, 6), tree.req_decode(req, 7)]
        assert isinstance(req, LegacyReq) == (target is old)
        assert tree.req_row(req) == row
        rows.append(row)
    assert rows[0] == rows[1]


@pytest.mark.parametrize("spec", TARGETS)
@pytest.mark.parametrize("finished", [True, False])
def test_a_second_release_is_refused_and_changes_nothing(spec: str, finished: bool) -> None:
    """SGLang's tracked double free: a request released (finished or retracted) and then
    retracted again. Every release refuses it (a bare assert upstream) before any change."""
    tree = load_target(spec, family=REF).factory(8, 1)
    req = tree.req_open([1, 2, 3], None)
    tree.req_admit(req)
    tree.req_extend(req, 3)
    tree.req_release(req, finished)
    before = (sorted(tree.free_slots().elements()), tree.sizes())
    with pytest.raises(AssertionError):
        tree.req_release(req, False)
    assert (sorted(tree.free_slots().elements()), tree.sizes()) == before
