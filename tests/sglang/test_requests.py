"""The sglang family's request level (:mod:`properties.families.sglang.requests`): a request's
life (admission, chunks with checkpoints, decode steps, preemption and resumption, finish)
judged against the model on the bundled reference; its JSON and replay script; the bundled
request API's typed errors, each before any change; and the judge catching a broken request
path (a finish that frees its row's own part twice, a checkpoint that keeps the request's
duplicate slots in its row)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from models.core.invariants import Violation
from models.families.sglang.model import OutOfContract
from models.families.sglang.ops import Evict, TreeConfig
from models.families.sglang.requests import Running
from prefixcache.sglang.errors import RequestStateError, SGLangCacheError
from prefixcache.sglang.srt.mem_cache import radix_cache
from properties.core.targets import Target, load_target
from properties.families.sglang.family import FAMILY, REF
from properties.families.sglang.judge import TreeJudge
from properties.families.sglang.requests import (
    Admit,
    Admitted,
    Chunk,
    Complete,
    Decode,
    Preempt,
    RequestOp,
    Resume,
)

BUNDLED = "prefixcache.sglang.srt.mem_cache.radix_cache:RadixCache"
CONFIGS = [TreeConfig(8, 1), TreeConfig(8, 2)]


def _target() -> Target:
    return load_target(BUNDLED, family=REF)


def _life(ps: int) -> list[RequestOp | Evict]:
    """Two requests sharing a prompt prefix; one is preempted (at page size 1 after the
    other's chunk was refused), resumed and finished; the other finishes; everything is
    evicted; a third one reuses nothing."""
    again: list[RequestOp | Evict] = [Chunk(1, 4 * ps)] if ps == 1 else []  # once refused
    return [Admit((1, 2, 3, 4, 5)), Chunk(0, 2 * ps), Admit((1, 2, 3, 4, 0)),
            Chunk(0, 4 * ps, False), Decode(0, 7), Chunk(1, 4 * ps), Preempt(0),
            *again, Decode(1, 1), Resume(0), Chunk(0, 8 * ps), Decode(0, 2), Complete(0),
            Complete(1), Evict(100), Admit((2, 2)), Chunk(2, 2, False)]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_a_request_life_conforms_and_gives_every_slot_back(config: TreeConfig) -> None:
    judge = FAMILY.judge(_target(), config)
    program = _life(config.page_size)
    outcomes = [judge.step(op) for op in program]
    assert outcomes[2] == Admitted(1, 2 * config.page_size)  # hit on the published chunk
    if config.page_size == 1:
        assert outcomes[5] is None  # refused: the rest is locked; the preemption makes room
    resumed = outcomes[program.index(Resume(0))]
    assert isinstance(resumed, Admitted) and resumed.matched >= 2 * config.page_size
    done = [r for r in judge.model.requests if isinstance(r, Running) and r.state == "done"]
    assert len(done) == 2 and all(r.node is None and not r.slots for r in done)
    assert judge.model.tree.sizes() == (0, 0)  # nothing locked: locks balance
    running = judge.model.requests[2]
    assert isinstance(running, Running) and running.computed == 2
    own = judge.model.pages_of(running.slots)
    assert judge.tree.available_size() == config.size - len(own)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_the_program_round_trips_json_and_its_script_replays(config: TreeConfig) -> None:
    target = _target()
    judge = FAMILY.judge(target, config)
    for op in _life(config.page_size):
        judge.step(op)
        assert FAMILY.vocabulary.op_from_json(FAMILY.vocabulary.op_to_json(op)) == op
    script = FAMILY.script(target, config, judge.log)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile("\n".join(script.body), "reproducer", "exec"), {})
    assert "evictable, protected, total" in out.getvalue()


def test_operations_outside_a_request_state_are_out_of_contract() -> None:
    judge = FAMILY.judge(_target(), TreeConfig(4, 1))
    judge.step(Admit((1, 2)))
    for op in (Decode(0, 1), Resume(0), Chunk(1, 1), Admit(())):
        with pytest.raises(OutOfContract):
            judge.step(op)
    judge.step(Chunk(0, 2))
    judge.step(Complete(0))
    with pytest.raises(OutOfContract):
        judge.step(Preempt(0))


def _bundled_request(ps: int = 1) -> tuple[Any, Any]:
    """A bundled driver with one admitted request that computed three tokens."""
    tree = _target().factory(8, ps)
    req = tree.req_open([1, 2, 3], None)
    tree.req_admit(req)
    tree.req_extend(req, 3)
    return tree, req


def _state(tree: Any, req: Any) -> tuple[Any, ...]:
    kv = req.kv
    return (sorted(tree.free_slots().elements()), tree.sizes(), tree.req_row(req),
            kv.cache_protected_len, kv.kv_committed_len, kv.req_pool_idx, req.lock)


@pytest.mark.parametrize("misuse", ["past_computed", "before_protected", "no_row",
                                    "release_twice", "foreign_lock"])
def test_the_bundled_request_api_refuses_misuse_with_a_typed_error_and_no_change(
        misuse: str) -> None:
    tree, req = _bundled_request()
    cache = tree.cache
    calls: dict[str, Callable[[], None]] = {
        "past_computed": lambda: cache.checkpoint(req, up_to=4),
        "before_protected": lambda: cache.checkpoint(req, up_to=-1),
        "no_row": lambda: cache.checkpoint(radix_cache.Req("x", [1]), up_to=0),
        "release_twice": lambda: radix_cache.release_kv_cache(req, cache, checkpoint=True),
        "foreign_lock": lambda: cache.checkpoint(req, up_to=2),
    }
    if misuse == "release_twice":
        tree.req_release(req, True)
    if misuse == "foreign_lock":
        other = _bundled_request()[0]
        node = other.cache.insert(other._insert(other._key([9], None), other.alloc(1))
                                  ).last_device_node
        req.lock = other.cache.lock(node)
    before = _state(tree, req)
    with pytest.raises(SGLangCacheError) as raised:
        calls[misuse]()
    assert _state(tree, req) == before
    if misuse in ("past_computed", "no_row", "release_twice"):
        assert isinstance(raised.value, RequestStateError)


@contextlib.contextmanager
def _patched(name: str, replacement: Callable[..., Any]) -> Iterator[None]:
    original = getattr(radix_cache, name)
    setattr(radix_cache, name, replacement)
    try:
        yield
    finally:
        setattr(radix_cache, name, original)


def _run(config: TreeConfig, program: list[RequestOp | Evict]) -> Violation:
    judge: TreeJudge = FAMILY.judge(_target(), config)
    with pytest.raises(Violation) as raised:
        for op in program:
            judge.step(op)
    return raised.value


def test_the_judge_catches_a_finish_that_frees_the_rows_own_part_twice() -> None:
    release = radix_cache.release_kv_cache

    def twice(req: Any, tree_cache: Any, *, checkpoint: bool) -> None:
        kv, row = req.kv, list(tree_cache.req_to_token_pool.req_to_token[req.kv.req_pool_idx])
        own = row[kv.cache_protected_len:kv.kv_committed_len]
        release(req, tree_cache, checkpoint=checkpoint)
        if not checkpoint and own:  # a preemption gives the row's own part back again
            tree_cache.token_to_kv_pool_allocator._allocated.update(own)
            tree_cache.token_to_kv_pool_allocator.free(own)

    with _patched("release_kv_cache", twice):
        found = _run(TreeConfig(4, 1), [Admit((1, 2, 3)), Chunk(0, 3, False), Preempt(0)])
    assert found.family.value == "OWN", found


def test_the_judge_catches_a_checkpoint_that_keeps_duplicates_in_the_row() -> None:
    checkpoint = radix_cache.RadixCache.checkpoint

    def keeps(self: Any, req: Any, *, up_to: int) -> None:
        kv = req.kv
        row = list(self.req_to_token_pool.req_to_token[kv.req_pool_idx])
        checkpoint(self, req, up_to=up_to)
        self.req_to_token_pool.req_to_token[kv.req_pool_idx][:] = row  # row not repointed

    radix_cache.RadixCache.checkpoint = keeps  # type: ignore[method-assign]
    try:
        found = _run(TreeConfig(8, 1), [Admit((1, 2)), Admit((1, 2, 3)), Chunk(0, 2),
                                        Chunk(1, 3)])
    finally:
        radix_cache.RadixCache.checkpoint = checkpoint  # type: ignore[method-assign]
    assert found.family.value == "CONTENT", found
