"""Every stand-in the pool level's loader installs (:func:`upstream.block_policy`), with why it
changes nothing the suite observes (:data:`STAND_INS`), checked against a recording load of
each supported release: once loading is over, what upstream touches of a stand-in while the
pool machine runs (ci profile, fewer examples) must be what a test proves equal to upstream's
own code (``proved``, tests in ``tests/v1/test_upstream_closure.py``); every other stand-in
must stay untouched. A stand-in added to the loader without a row here fails the first test.
The request level's are audited in ``tests/v1/request/test_stand_in_audit.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from properties.core.plugin import load_expected
from properties.families.v1 import api_calls, upstream
from properties.families.v1.closure import Policy
from properties.families.v1.family import FAMILY
from properties.families.v1.targets import from_modules
from tests.v1._stand_in_recorder import Recorder

# module -> (why nothing observed changes, {name upstream may touch: the test proving it}).
STAND_INS: dict[str, tuple[str, dict[str, str]]] = {
    "vllm.logger": ("stdlib logging: no state the pool reads",
                    {"init_logger": "logging only"}),
    "vllm.envs": ("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES is False: events carry the bytes keys",
                  {"VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES":
                   "test_events_with_int_hashes_are_the_same_events"}),
    "vllm.distributed.kv_events": (
        "records of the keyword arguments upstream passes",
        {name: "test_event_records_carry_upstreams_fields"
         for name in ("BlockStored", "BlockRemoved", "AllBlocksCleared")}),
    "vllm.multimodal.utils": ("the bisection its docstring specifies",
                              {"get_mm_features_in_window": "test_mm_window_is_upstreams"}),
    "vllm.v1.utils": ("the bytes of a prompt-embeds stand-in",
                      {"tensor_data": "test_tensor_data_hashes_the_bytes_upstream_hashes"}),
    "vllm.v1.request": ("the request is the suite's StandInRequest; names for annotations", {}),
    "vllm.v1.metrics.stats": ("the eviction events of a metrics collector the suite never "
                              "builds", {}),
    "vllm.config": ("engine configuration helpers the pool never calls", {}),
    "vllm.v1.kv_cache_interface": ("spec classes in annotations (real at the request level)",
                                   {}),
    "vllm.v1.kv_cache_spec_registry": ("the spec registry (real at the request level)", {}),
}
# Fallbacks, used only when the real module cannot load.
FALLBACKS: dict[str, tuple[str, dict[str, str]]] = {
    "vllm.utils": ("0.11's monolithic module: cdiv and the pickle sha256 hasher",
                   {"cdiv": "test_011_utils_fallback_is_033s_real_helpers",
                    "sha256": "test_011_utils_fallback_is_033s_real_helpers"}),
    "cbor2": ("not installed: only the *_cbor hashers, unused, call it", {}),
    "vllm.v1.token_buffer": ("0.34's without numpy: token_slice is a plain slice",
                             {"token_slice": "test_token_slice_fallback_is_upstreams"}),
}


def test_every_stand_in_of_the_loader_is_listed() -> None:
    policy = upstream.block_policy()
    assert set(policy.stubs) == set(STAND_INS)
    assert set(policy.fallbacks) == set(FALLBACKS)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    recorder = Recorder()
    base = upstream.block_policy()
    policy = Policy(stubs={n: recorder.wrap(b) for n, b in base.stubs.items()},
                    fallbacks={n: recorder.wrap(b) for n, b in base.fallbacks.items()},
                    forbidden=base.forbidden)
    monkeypatch.setattr(upstream, "block_policy", lambda: policy)
    monkeypatch.setattr(upstream, "_LOADED", {})  # a fresh load, with the recording policy
    yield recorder


@pytest.mark.parametrize("version", upstream.SUPPORTED_VERSIONS)
def test_stand_ins_touched_while_the_machine_runs_are_the_proved_ones(
        version: str, recorded: Recorder) -> None:
    if upstream.cached_wheel(version) is None:
        pytest.skip(f"no vllm {version} wheel cached: `{upstream.FETCH_COMMAND} --version "
                    f"{version}`")
    mods = upstream.load_vllm_v1(version=version)
    assert set(mods.stubbed) <= set(STAND_INS) | set(FALLBACKS), mods.stubbed
    pool = from_modules(mods)
    xfails = Path(__file__).resolve().parents[2] / "conformance" / f"vllm-{version[:4]}.xfails.json"
    entries = [e for e in load_expected(str(xfails))
               if e.applies(version, FAMILY.target_of(pool).judges)]
    recorded.live = True
    counts = api_calls.count_calls(pool, "ci", 40, 30, {n for e in entries for n in e.avoid},
                                   entries)
    assert not counts.stopped, counts.stopped  # run as the check runs it, entries absorbed
    allowed = {f"{module}.{name}" for table in (STAND_INS, FALLBACKS)
               for module, (_, proved) in table.items() for name in proved}
    assert recorded.touched <= allowed, sorted(recorded.touched - allowed)
    # the recording works: the pool builds its events through the stand-in
    assert "vllm.distributed.kv_events.BlockStored" in recorded.touched, recorded.touched
