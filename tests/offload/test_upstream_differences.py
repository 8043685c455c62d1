"""Where upstream's offload managers disagree with the bundled contract: each a minimal
program, run against the wheel, asserting upstream's behaviour as observed (so a release that
changes it shows up here) beside the bundled behaviour.

Classification (see each test): a real defect, or a design difference the connector covers.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from prefixcache.v1.kv_offload.base import LookupResult, ReqContext, make_offload_key
from prefixcache.v1.kv_offload.cpu.manager import CPUOffloadingManager
from prefixcache.v1.kv_offload.errors import OffloadArgumentError
from properties.families.offload import upstream as up


def _mods(version: str) -> up.OffloadModules:
    if up.cached_wheel(version) is None:
        pytest.skip(f"no vllm {version} wheel cached: run `{up.FETCH_COMMAND} --version "
                    f"{version}`")
    return up.load_vllm_offload(version=version)


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
def test_duplicate_key_in_offer_leaks_a_chunk(version: str) -> None:
    """Real defect (robustness): a key offered twice gets two chunks; one stays write-pending
    forever, so a 2-chunk tier holding one key can no longer take two. The engine's offers
    come from distinct chained block hashes, so it needs a caller bug to trigger. Bundled:
    OffloadArgumentError, nothing allocated."""
    mods = _mods(version)
    t = mods.types
    a, b, c = (t.make_offload_key(bytes([i]) * 8, 0) for i in (1, 2, 3))
    m = up.new_manager(mods, 2)
    ctx = t.ReqContext("r")
    out = m.prepare_store([a, a], ctx)
    assert len(out.keys_to_store) == 2
    m.complete_store([a, a], ctx)
    assert m._num_write_pending_chunks == 1  # leaked: no write is in flight
    assert m.prepare_store([b, c], t.ReqContext("s")) is None
    ref = CPUOffloadingManager(2)
    k = make_offload_key(b"\x01" * 8, 0)
    with pytest.raises(OffloadArgumentError):
        ref.prepare_store([k, k], ReqContext("r"))
    assert ref.get_num_free_chunks() == 2


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
def test_reset_announces_no_removal(version: str) -> None:
    """Design difference: upstream's manager emits no event on ``reset_cache``, so replaying
    its events keeps keys it no longer serves; vLLM's offloading connector resets its event
    tracker beside the call. The bundled manager announces the removals itself."""
    mods = _mods(version)
    t = mods.types
    a = t.make_offload_key(b"\x01" * 8, 0)
    m = up.new_manager(mods, 2)
    ctx = t.ReqContext("r")
    m.prepare_store([a], ctx)
    m.complete_store([a], ctx)
    list(m.take_events())
    m.reset_cache()
    assert list(m.take_events()) == [] and m.lookup(a, ctx) == t.LookupResult.MISS
    ref = CPUOffloadingManager(2, enable_events=True)
    k = make_offload_key(b"\x01" * 8, 0)
    rc = ReqContext("r")
    ref.prepare_store([k], rc)
    ref.complete_store([k], rc)
    list(ref.take_events())
    ref.reset_cache()
    assert [(e.removed, e.keys) for e in ref.take_events()] == [(True, [k])]


def test_033_counts_a_retry_toward_store_threshold() -> None:
    """Real defect in 0.33.0, fixed in 0.34.0: with ``store_threshold=2`` one request offering
    a key twice (a retry after a failed store, a re-offer after preemption) gets it admitted,
    though no second request used it."""
    for version, admitted in (("0.33.0", True), ("0.34.0", False)):
        mods = _mods(version)
        t = mods.types
        a = t.make_offload_key(b"\x01" * 8, 0)
        m = up.new_manager(mods, 4, store_threshold=2)
        ctx = t.ReqContext("r")
        m.prepare_store([a], ctx)
        assert (m.prepare_store([a], ctx).keys_to_store == [a]) is admitted
    ref = CPUOffloadingManager(4, store_threshold=2)
    k, rc = make_offload_key(b"\x01" * 8, 0), ReqContext("r")
    ref.prepare_store([k], rc)
    out = ref.prepare_store([k], rc)
    assert out is not None and out.keys_to_store == []


def test_011_evicts_a_key_of_the_offer() -> None:
    """Real defect in 0.11.0, fixed by 0.33.0 (protected keys): offering [a, b] to a 1-chunk
    tier holding a evicts a to store b, so a key the offer found stored is gone after it."""
    mods = _mods("0.11.0")
    m = up.new_manager(mods, 1)
    a, b = b"\x01" * 8, b"\x02" * 8
    m.prepare_store([a])
    m.complete_store([a])
    out = m.prepare_store([a, b])
    assert out.block_hashes_evicted == [a] and m.lookup([a]) == 0
    ref = CPUOffloadingManager(1)
    ka, kb = make_offload_key(a, 0), make_offload_key(b, 0)
    rc = ReqContext("r")
    ref.prepare_store([ka], rc)
    ref.complete_store([ka], rc)
    assert ref.prepare_store([ka, kb], ReqContext("s")) is None
    assert ref.lookup(ka, rc) is LookupResult.HIT


def test_misuse_checks_are_asserts_that_vanish_under_O() -> None:
    """Real defect (hardening): upstream guards ``complete_load`` with ``assert``; under
    ``python -O`` completing a load never prepared drives ``ref_cnt`` to -1, and the stored
    chunk reads as write-pending (HIT_PENDING) from then on. Bundled: LoadNotPreparedError
    whatever the flags."""
    mods = _mods("0.34.0")
    script = (
        "from properties.families.offload import upstream as up\n"
        "m = up.load_vllm_offload(version='0.34.0'); t = m.types\n"
        "a = t.make_offload_key(b'\\x01' * 8, 0); c = t.ReqContext('r')\n"
        "mgr = up.new_manager(m, 2); mgr.prepare_store([a], c); mgr.complete_store([a], c)\n"
        "mgr.complete_load([a], c)\n"
        "print(mgr.lookup(a, c).name)\n")
    out = subprocess.run([sys.executable, "-O", "-c", script], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "HIT_PENDING", mods.version
