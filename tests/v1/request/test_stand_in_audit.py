"""Every stand-in the manager level's loader installs, with why it changes nothing the suite
observes (:data:`STAND_INS`), checked against a recording load: the release's manager is
loaded with each stand-in module wrapped so that, once loading is over, every call of one of
its functions, construction of one of its classes and use of one of its objects by upstream
code is recorded; then the request machine runs (ci profile, every configuration, fewer
examples). A stand-in upstream touches during the run must be one whose equivalence with
upstream's own code a test proves (``proved``); every other one must stay untouched
(``unused``: the judged paths never reach it). A stand-in added to the loader without a row
here fails the first test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from properties.families.v1 import upstream
from properties.families.v1.closure import Policy
from properties.families.v1.request import api_calls, loader
from properties.families.v1.request.target import ManagerTarget
from tests.v1._stand_in_recorder import Recorder

# module -> (what upstream uses it for, why it changes nothing observed, proof). ``proved``:
# the names upstream may touch while the machine runs, each proved equal to upstream's own
# code by the named test; ``unused``: nothing of the module may be touched then.
STAND_INS: dict[str, tuple[str, str, dict[str, str]]] = {
    "vllm.v1.request": (
        "Request (annotations) and RequestStatus (the manager's is_finished order)",
        "statuses are compared as upstream orders them; the request itself is the suite's "
        "ManagerRequest, built by the executor",
        {"RequestStatus": "test_stand_in_proofs.py::test_request_status_order_is_upstreams"}),
    "vllm.utils.torch_utils": (
        "get_dtype_size: the spec classes' page sizes",
        "the element size of the same torch dtype",
        {"get_dtype_size": "test_stand_in_proofs.py::test_dtype_size_is_upstreams"}),
    "vllm.v1.metrics.stats": (
        "PrefixCacheStats (log_stats), KVCacheEvictionEvent (the pool's metrics collector)",
        "the counters upstream aggregates, field for field; no metrics collector is built",
        {"PrefixCacheStats":
         "test_stand_in_proofs.py::test_prefix_cache_stats_aggregate_as_upstreams"}),
    "vllm.logger": (
        "init_logger at import; warnings the manager logs",
        "a stdlib logger: logging returns None and changes no state",
        {"init_logger": "logging only (tests/v1/test_upstream_closure.py lists it as called)"}),
    "vllm.config": (
        "get_current_vllm_config_or_none when the spec registry fills (at load)",
        "no engine config: the registry registers upstream's built-in specs only", {}),
    "vllm.platforms": (
        "current_platform.register_custom_kv_cache_specs when the registry fills (at load)",
        "no platform plugin registers specs", {}),
    "vllm.v1.attention.backends.registry": (
        "MambaAttentionBackendEnum: a Mamba spec field's default",
        "no Mamba group is built", {}),
    "vllm.envs": (
        "VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES, read when the pool builds an event (full_stats and "
        "hybrid: events on)",
        "False: events carry the bytes keys, upstream's int form before its own conversion",
        {"VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES": "tests/v1/test_upstream_closure.py::"
                                                "test_events_with_int_hashes_are_the_same_events"}),
    "vllm.distributed.kv_events": (
        "BlockStored, BlockRemoved, AllBlocksCleared: the pool builds them, the manager's "
        "take_events annotates each BlockStored (full_stats and hybrid: events on)",
        "records of the keyword arguments upstream passes, and the attributes the manager sets, "
        "each a field upstream's struct declares",
        {name: "tests/v1/test_upstream_closure.py::test_event_records_carry_upstreams_fields, "
               "test_stand_in_proofs.py::test_manager_event_records_carry_upstreams_fields"
         for name in ("BlockStored", "BlockRemoved", "AllBlocksCleared")}),
    "vllm.multimodal.utils": (
        "get_mm_features_in_window: multimodal extra keys",
        "the request machine draws no multimodal item (the pool level proves the bisection: "
        "test_mm_window_is_upstreams)", {}),
    "vllm.v1.utils": (
        "tensor_data: prompt-embeds keys",
        "the request machine draws no prompt embeds (the pool level proves it: "
        "test_tensor_data_hashes_the_bytes_upstream_hashes)", {}),
}
# Fallbacks, used only when the real module cannot load: module -> why nothing observed changes.
FALLBACKS = {
    "cbor2": "not installed: its stand-in refuses to encode, and only the *_cbor hashers, "
             "which the suite does not use (it hashes with sha256), call it",
    "vllm.utils": "0.11's monolithic module (not a manager release)",
    "vllm.v1.token_buffer": "0.34's, without numpy: token_slice is a plain slice (the pool "
                            "level proves it: test_token_slice_fallback_is_upstreams)",
}


def test_every_stand_in_of_the_loader_is_listed() -> None:
    policy = loader.manager_policy()
    assert set(policy.stubs) == set(STAND_INS)
    assert set(policy.fallbacks) == set(FALLBACKS)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    recorder = Recorder()
    base = loader.manager_policy()
    policy = Policy(stubs={n: recorder.wrap(b) for n, b in base.stubs.items()},
                    fallbacks={n: recorder.wrap(b) for n, b in base.fallbacks.items()},
                    forbidden=base.forbidden)
    monkeypatch.setattr(loader, "manager_policy", lambda: policy)
    monkeypatch.setattr(loader, "_LOADED", {})  # a fresh load, with the recording policy
    yield recorder


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
def test_stand_ins_touched_while_the_machine_runs_are_the_proved_ones(
        version: str, recorded: Recorder) -> None:
    if upstream.cached_wheel(version) is None:
        pytest.skip(f"no vllm {version} wheel cached: `{upstream.FETCH_COMMAND} --version "
                    f"{version}`")
    mods = loader.load_manager(version=version)
    assert set(mods.stubbed) - set(STAND_INS) <= set(FALLBACKS), mods.stubbed
    recorded.live = True
    counts = api_calls.count_calls(ManagerTarget("vllm", mods),
                                   f"properties.upstream:vllm_v0{version[2:4]}_manager",
                                   "ci", max_examples=25, max_steps=30,
                                   avoid={"preempt_scheduled", "duplicate_events"})
    assert not counts.stopped, counts.stopped
    allowed = {f"{module}.{name}" for module, (_, _, proved) in STAND_INS.items()
               for name in proved}
    assert recorded.touched <= allowed, sorted(recorded.touched - allowed)
    # the recording works: the stats the full_stats configuration logs are built by upstream,
    # and so are the events it publishes
    assert "vllm.v1.metrics.stats.PrefixCacheStats" in recorded.touched, recorded.touched
    assert "vllm.distributed.kv_events.BlockStored" in recorded.touched, recorded.touched


def test_a_stand_in_the_run_reaches_is_recorded(recorded: Recorder) -> None:
    """The audit can fail: with events on, upstream builds event records (a store, a removal
    or a reset, whichever the program reaches), the recording sees it, and without their proof
    rows the audit's check would fail."""
    from properties.families.v1.request.target import FULL_STATS

    if upstream.cached_wheel("0.34.0") is None:
        pytest.skip(f"no vllm 0.34.0 wheel cached: `{upstream.FETCH_COMMAND}`")
    mods = loader.load_manager(version="0.34.0")
    recorded.live = True
    api_calls.count_calls(ManagerTarget("vllm", mods), max_examples=10, max_steps=20,
                          configs={"events": FULL_STATS})
    events = {f"vllm.distributed.kv_events.{name}"
              for name in ("BlockStored", "BlockRemoved", "AllBlocksCleared")}
    assert recorded.touched & events, recorded.touched
    unproved = {f"{m}.{n}" for m, (_, _, p) in STAND_INS.items()
                if m != "vllm.distributed.kv_events" for n in p}
    assert not recorded.touched <= unproved
