"""Hash lookahead (``BlockPool(..., num_hash_lookahead_tokens=L)``): detected from the
constructor, drawn by the pool machine, judged by the key contract and the event checks, and
carried by reproducers. Programs replay on the bundled pool and, when their wheels are cached,
on vLLM 0.34.0 and 0.33.0 (both have it); 0.11.0 has not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.core.invariants import Violation
from models.families.v1 import ops
from models.families.v1.invariants import Family
from models.families.v1.pool_model import PoolConfig
from properties.families.v1 import targets, upstream
from properties.families.v1.executor import run_program
from properties.families.v1.machine import default_config, drawn_lookahead
from properties.families.v1.reproducer import config_json, config_of, script_prelude

CONFIG = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2,), lookahead=2)
# Two requests equal in block 0 but not in the two tokens after it; r0 has a second block
# whose lookahead tokens exist, r1 not (4 tokens: (4 - 2) // 2 = 1 key).
PROGRAM = [ops.Req(tokens=(1, 1, 0, 2, 2, 2)), ops.Req(tokens=(1, 1, 0, 1)),
           ops.GetNew(2), ops.CacheFull(0, (1, 2), 0, 2, 0),
           ops.GetNew(1), ops.CacheFull(1, (3,), 0, 1, 0), ops.TakeEvents(),
           ops.Lookup(1, 0, (0,))]


def _releases() -> list[str]:
    return [v for v in ("0.34.0", "0.33.0") if upstream.cached_wheel(v) is not None]


def _target(version: str | None) -> targets.PoolTarget:
    if version is None:
        return targets.load(targets.DEFAULT_SPEC)
    return targets.from_modules(upstream.load_vllm_v1(version=version))


@pytest.mark.parametrize("version", [None, *_releases()])
def test_lookahead_keys_and_events(version: str | None) -> None:
    target = _target(version)
    assert target.caps.hash_lookahead
    ex = run_program(target, CONFIG, PROGRAM)
    assert [len(h) for h in ex.hashes] == [2, 1]
    assert ex.hashes[0][0] != ex.hashes[1][0]  # same block tokens, other lookahead tokens
    assert len(ex.replay.keys) == 3  # the events were replayed: three keys stored


def test_the_events_carry_the_lookahead_tokens() -> None:
    ex = run_program(_target(None), CONFIG, PROGRAM[:4])
    (event,) = [e for e in ex.adapter.take_events() if type(e).__name__ == "BlockStored"]
    assert event.lookahead_token_ids == [[0, 2], [2, 2]]
    assert event.token_ids == [1, 1, 0, 2]


def test_without_lookahead_the_blocks_are_shared() -> None:
    ex = run_program(_target(None), replace(CONFIG, lookahead=0), PROGRAM[:2])
    assert ex.hashes[0][0] == ex.hashes[1][0]


def test_a_hasher_ignoring_the_lookahead_is_a_hash_violation() -> None:
    """The executor judges the hasher with the pool's lookahead: hashes made without it
    (as a release that lacks the feature would make them) break the contract."""
    target = _target(None)
    plain = target.hasher(2)  # no lookahead
    with pytest.raises(Violation) as info:
        run_program(replace(target, kv_cache_utils=_Utils(plain)), CONFIG, PROGRAM[:2])
    assert info.value.family is Family.HASH


class _Utils:
    """A ``kv_cache_utils`` whose hasher ignores ``num_hash_lookahead_tokens``."""

    def __init__(self, hasher: object) -> None:
        self._hasher = hasher

    def get_request_block_hasher(self, *args: object, **kwargs: object) -> object:
        return self._hasher


def test_the_capability_is_detected_from_the_constructor() -> None:
    assert targets.load(targets.DEFAULT_SPEC).caps.hash_lookahead
    if upstream.cached_wheel("0.11.0") is not None:
        assert not targets.vllm_v011_block_pool().caps.hash_lookahead


def test_drawn_only_inside_a_test_and_where_the_target_has_it() -> None:
    bundled = targets.load(targets.DEFAULT_SPEC)
    assert drawn_lookahead(bundled) == 0  # no Hypothesis test running
    assert default_config(bundled).lookahead == 0
    without = replace(bundled, caps=replace(bundled.caps, hash_lookahead=False))
    assert drawn_lookahead(without) == 0


def test_reproducers_carry_the_lookahead() -> None:
    assert config_of(config_json(CONFIG)) == CONFIG
    assert "lookahead" not in config_json(replace(CONFIG, lookahead=0))  # old files unchanged
    lines = "\n".join(script_prelude(targets.load(targets.DEFAULT_SPEC), CONFIG))
    assert "BlockPool(8, True, 2, enable_kv_cache_events=True, num_hash_lookahead_tokens=2)" \
        in lines
    assert "get_request_block_hasher(2, hash_fn, num_hash_lookahead_tokens=2)" in lines
    namespace: dict[str, object] = {}
    exec(lines, namespace)  # the prelude builds the pool it names
    pool = namespace["pool"]
    assert pool.num_hash_lookahead_tokens == 2  # type: ignore[attr-defined]


def test_the_router_judge_tells_blocks_apart_by_their_lookahead_tokens(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two blocks of equal tokens under one parent, keyed apart by their lookahead tokens: the
    router judge keys Dynamo's nodes by the events' ``lookahead_token_ids`` too, so evicting
    one leaves the other routable; without them Dynamo's tree drops both (a hit lost)."""
    from properties.families.v1 import router

    config = replace(CONFIG, num_blocks=4)
    program = [ops.Req(tokens=(1, 1, 0, 2)), ops.Req(tokens=(1, 1, 0, 1)), ops.GetNew(2),
               ops.CacheFull(0, (1,), 0, 1, 0), ops.CacheFull(1, (2,), 0, 1, 0),
               ops.TakeEvents(), ops.Evict((1,)), ops.TakeEvents()]
    ex = run_program(_target(None), config, program)
    if ex.router is None:
        pytest.skip("Dynamo's runtime is not cached (python -m properties.upstream fetch dynamo)")
    translate = router.translate

    def without_lookahead(core: object, event: object) -> object:
        if type(event).__name__ == "BlockStored":
            event = replace(event, lookahead_token_ids=None)  # type: ignore[type-var]
        return translate(core, event)  # type: ignore[arg-type]

    monkeypatch.setattr(router, "translate", without_lookahead)
    with pytest.raises(Violation, match="Dynamo's router matches 0") as info:
        run_program(_target(None), config, program)
    assert info.value.family is Family.CACHE
