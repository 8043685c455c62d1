"""The sglang family's allocator level (:mod:`properties.families.sglang.slots`): bare
allocations and their frees judged against the model, and misuse probes on fresh trees (the
bundled reference refuses each with a typed error and changes nothing; upstream's accepted
misuse becomes a robustness finding with a replay script)."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from models.core.invariants import Violation
from models.families.sglang.model import OutOfContract
from models.families.sglang.ops import TreeConfig
from prefixcache.sglang.errors import SGLangCacheError
from properties.core import robustness
from properties.core.targets import Target, load_target
from properties.families.sglang import upstream as sgl
from properties.families.sglang.family import FAMILY, REF
from properties.families.sglang.slots import (
    FULL_MISUSES,
    HOWS,
    MISUSES,
    SWA_MISUSES,
    Give,
    Probe,
    Take,
    _state,
)
from properties.families.sglang.targets import BUNDLED_SWA_SPEC

BUNDLED = "prefixcache.sglang.srt.mem_cache.radix_cache:RadixCache"
CONFIGS = [TreeConfig(4, 1), TreeConfig(4, 4)]
#: The SWA level's pool shape (window 2, three SWA pages).
SWA_CONFIG = TreeConfig(4, 1, 2, 3)


def _target(spec: str) -> Target:
    return load_target(spec, family=REF)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_holds_take_and_give_back_slots_every_way(config: TreeConfig) -> None:
    target = _target(BUNDLED)
    judge = FAMILY.judge(target, config)
    for how in HOWS:
        hold = judge.step(Take(2))
        assert hold is not None and len(judge.model.holds[hold]) == 2 * config.page_size
        assert judge.tree.available_size() == config.size - 2 * config.page_size
        judge.step(Give(hold, how))
        assert judge.tree.available_size() == config.size
    assert judge.step(Take(config.pages + 1)) is None  # too few free: refused, not a hold
    for op in (Take(3), Give(1, "group"), Probe("double_unlock", 2)):
        assert FAMILY.vocabulary.op_from_json(FAMILY.vocabulary.op_to_json(op)) == op


def test_every_misuse_is_drawn_at_some_level() -> None:
    assert set(FULL_MISUSES) | set(SWA_MISUSES) == set(MISUSES)
    assert "double_release_swa" not in FULL_MISUSES and "double_free" not in SWA_MISUSES


@pytest.mark.parametrize(("spec", "config", "misuse"),
                         [(BUNDLED, c, m) for c in CONFIGS for m in FULL_MISUSES]
                         + [(BUNDLED_SWA_SPEC, SWA_CONFIG, m) for m in SWA_MISUSES],
                         ids=str)
def test_the_bundled_reference_refuses_each_misuse_with_a_typed_error_and_no_change(
        spec: str, config: TreeConfig, misuse: str) -> None:
    target = _target(spec)
    assert target.misuse_types and issubclass(target.misuse_types[0], SGLangCacheError)
    judge = FAMILY.judge(target, config)
    assert judge.step(Probe(misuse, 1)) is None  # the probe found nothing to report
    setup, call = Probe(misuse, 1).scenario(config)  # and directly:
    where: dict[str, Any] = {"tree": judge.fresh(), "other": judge.fresh()}
    exec("\n".join(setup), where)
    before = _state(where)
    with pytest.raises(SGLangCacheError):
        exec(call, where)
    assert _state(where) == before


def test_a_target_claiming_typed_errors_fails_the_run_when_it_accepts_misuse() -> None:
    target = _target("tests.zoo.sglang.mutants:free_skips_the_double_free_check")
    judge = FAMILY.judge(target, CONFIGS[0])
    with pytest.raises(Violation) as caught:
        judge.step(Probe("double_free", 0))
    assert caught.value.family.value == "OWN"


upstream_only = pytest.mark.skipif(sgl.unavailable_reason() is not None,
                                   reason=str(sgl.unavailable_reason()))


@upstream_only
def test_upstream_classic_accepts_each_misuse_and_is_reported_with_a_replay() -> None:
    spec = "properties.upstream:sglang_classic_radix_cache"
    target = _target(spec)
    judge = FAMILY.judge(target, TreeConfig(4, 1))
    robustness.take()
    details = {misuse: judge.step(Probe(misuse, 1)) for misuse in FULL_MISUSES}
    assert "available_size() 4 -> 5, over the capacity 4" in details["double_free"]
    assert "the node's lock count 0 -> -1" in details["double_unlock"]
    # it walks a stale node's parent chain: the empty tree's protected size goes up
    assert "(0, 0, 0) -> (-2, 2, 0)" in details["lock_stale_node"]
    assert details.pop("evict_negative") is None  # ignored, nothing changed
    assert all(details.values()), details
    found = {f.kind: f for f in robustness.take() if f.target == judge.name}
    assert set(found) <= set(MISUSES)  # an earlier test in this process may have met some
    for finding in found.values():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(finding.script, {})
        assert "before" in out.getvalue() and "after" in out.getvalue()


@upstream_only
def test_upstream_unified_python_refuses_a_stale_receipt_without_change() -> None:
    judge = FAMILY.judge(_target("properties.upstream:sglang_radix_cache"), TreeConfig(4, 1))
    assert judge.step(Probe("double_unlock", 0)) is None  # a bare assert, nothing changed
    assert judge.step(Probe("double_free", 0))  # its allocator accepts a double free


def test_a_program_with_allocator_level_steps_renders_and_replays() -> None:
    from properties.families.sglang.judge import Step
    from properties.families.sglang.slots import Extend

    target = _target(BUNDLED)
    config = TreeConfig(4, 4)
    program = [Take(2), Probe("double_free", 1), Give(0, "group"), Take(1),
               Extend(1, 3), Extend(1, 1, decode=True), Probe("double_unlock", 0),
               Give(1, "segment")]
    judge = FAMILY.judge(target, config)
    for op in program:
        judge.step(op)
    script = FAMILY.script(target, config, [Step(op) for op in program], judge)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec("\n".join(script.body), {})
    assert "probe raised DoubleFreeError" in out.getvalue()
    assert "probe raised LockUnderflowError" in out.getvalue()
    exec("\n".join(script.check), {})  # the replay under the judge passes


@pytest.mark.parametrize("spec", [BUNDLED, "properties.upstream:sglang_radix_cache"])
def test_rows_grow_by_alloc_extend_and_alloc_decode(spec: str) -> None:
    from properties.families.sglang.slots import Extend

    if spec != BUNDLED and sgl.unavailable_reason() is not None:
        pytest.skip(str(sgl.unavailable_reason()))
    config = TreeConfig(6, 4)
    judge = FAMILY.judge(_target(spec), config)
    hold = judge.step(Take(1))
    judge.step(Extend(hold, 3))  # a new page, 3 of its slots
    judge.step(Extend(hold, 1, decode=True))  # inside that page
    judge.step(Extend(hold, 1, decode=True))  # a new page
    assert judge.step(Extend(hold, 6)) is not None  # the rest of the page, then a new one
    assert len(judge.model.holds[hold]) == 15 and judge.tree.available_size() == 8
    assert judge.step(Extend(hold, 13)) is None  # 3 pages needed, 2 free: refused
    assert judge.step(Extend(hold, 9)) is not None  # 2 pages needed, 2 free
    judge.step(Give(hold, "free"))  # the partly used last page goes back whole
    assert judge.tree.available_size() == config.size
    with pytest.raises(OutOfContract):
        FAMILY.judge(_target(spec), TreeConfig(4, 1)).step(Extend(0, 1))


@pytest.mark.parametrize("spec", [BUNDLED, "properties.upstream:sglang_radix_cache"])
def test_batches_grow_several_rows_in_one_call(spec: str) -> None:
    from properties.families.sglang.slots import Batch

    if spec != BUNDLED and sgl.unavailable_reason() is not None:
        pytest.skip(str(sgl.unavailable_reason()))
    config = TreeConfig(8, 4)
    judge = FAMILY.judge(_target(spec), config)
    a, b, c = judge.step(Take(1)), judge.step(Take(1)), judge.step(Take(1))
    got = judge.step(Batch((b, a), (3, 6)))  # b: a new page; a: two new pages
    assert got is not None and len(got) == 9 and judge.tree.available_size() == 8
    assert len({slot // 4 for slot in got[:3]} & {slot // 4 for slot in got[3:]}) == 0
    got = judge.step(Batch((a, b, c), (1, 1, 1), decode=True))  # a, b in place; c a page
    assert got is not None and judge.tree.available_size() == 4
    assert got[:2] == [judge.model.holds[a][-2] + 1, judge.model.holds[b][-2] + 1]
    assert judge.step(Batch((a, c), (5, 4))) is None  # 2 + 1 pages needed, 1 free: refused
    assert judge.tree.available_size() == 4  # and nothing taken
    assert judge.step(Batch((c, a), (3, 1))) is not None  # c's page, a's page: none new
    for op in (Batch((2, 0), (3, 6)), Batch((0, 1), (1, 1), decode=True)):
        assert FAMILY.vocabulary.op_from_json(FAMILY.vocabulary.op_to_json(op)) == op
    with pytest.raises(OutOfContract):  # a hold twice in one batch
        judge.step(Batch((a, a), (1, 1)))


def test_a_batch_that_hands_one_page_to_two_rows_is_caught() -> None:
    from properties.families.sglang.slots import Batch

    judge = FAMILY.judge(_target(BUNDLED), TreeConfig(8, 4))
    a, b = judge.step(Take(1)), judge.step(Take(1))
    judge.tree.alloc_extend_rows = lambda rows: [20, 21, 22, 20]  # one page for both rows
    with pytest.raises(Violation) as caught:
        judge.step(Batch((a, b), (3, 1)))
    assert caught.value.family.value == "OWN"


def test_the_bundled_extend_refuses_a_wrong_last_loc_and_takes_nothing() -> None:
    from prefixcache.sglang.errors import InvalidArgumentError, InvalidSlotError
    from prefixcache.sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator

    alloc = PagedTokenToKVPoolAllocator(16, 4)
    row = alloc.alloc(4)
    assert row is not None
    with pytest.raises(InvalidArgumentError):  # not the slot of token 3
        alloc.alloc_extend([4], [4], [6], [6], [row[-2]], 2)
    with pytest.raises(InvalidArgumentError):  # extend_num_tokens is not the sum
        alloc.alloc_extend([4], [4], [6], [6], [row[-1]], 3)
    with pytest.raises(InvalidSlotError):  # mid-page, and that page is free
        alloc.alloc_decode([3], [3], [9])
    assert alloc.available_size() == 12
    assert alloc.alloc_extend([4], [4], [6], [6], [row[-1]], 2) == [8, 9]
    assert alloc.alloc_decode([7], [7], [9]) == [10]
    assert alloc.alloc_decode([9], [9], [11]) == [12] and alloc.available_size() == 4


@upstream_only
def test_only_releases_with_a_cpu_path_extend_rows() -> None:
    from properties.families.sglang.driver import UpstreamTree

    mods = sgl.load_sglang()
    assert UpstreamTree(mods, "classic", 16, 4).extends
    assert not UpstreamTree(mods, "classic", 16, 1).extends  # no paged allocator
    if sgl.unavailable_reason(sgl.CLASSIC_VERSION) is None:  # 0.5.18: triton kernels only
        assert not UpstreamTree(sgl.load_sglang(version=sgl.CLASSIC_VERSION), "classic", 16,
                                4).extends


@upstream_only
def test_upstream_rust_core_is_poisoned_by_a_foreign_receipt_and_its_tree_dropped() -> None:
    judge = FAMILY.judge(_target("properties.upstream:sglang_radix_cache_rust"),
                         TreeConfig(4, 1))
    detail = judge.step(Probe("unlock_foreign_receipt", 0))
    assert detail is not None and "corrupted: reading it raises" in detail
    assert judge.step(Probe("lock_stale_node", 0)) is None  # refused, unchanged
    judge.step(Take(1))  # the run's own tree is untouched by the poisoned probe tree
    assert judge.tree.available_size() == 3


@upstream_only
def test_upstream_swa_0518_walks_a_stale_node_and_is_reported_with_a_replay() -> None:
    spec = "properties.upstream:sglang_v0518_swa_radix_cache"
    judge = FAMILY.judge(_target(spec), SWA_CONFIG)
    robustness.take()
    detail = judge.step(Probe("lock_stale_node", 1))
    assert detail is not None and "(swa evictable, swa protected) (0, 0) -> (-2, 2)" in detail
    assert judge.step(Probe("double_release_swa", 1)) is None  # the lock ignores it
    for finding in robustness.take():
        if finding.target == judge.name and finding.kind == "lock_stale_node":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(finding.script, {})
            assert "before" in out.getvalue() and "after" in out.getvalue()
