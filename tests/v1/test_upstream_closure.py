"""The v1 loader on the real wheels: one closure resolver for every release, the version read from
the source, and proofs that each stand-in changes nothing the suite observes.

The stand-in proofs are of two kinds. *Surface*: every stand-in callable is traced while a
program drives each pool operation with every request feature (LoRA, salt, multimodal items,
prompt embeds) and events on; the stand-ins called are exactly the ones listed in
:data:`CALLED`, each proved below, and no other (``cbor2.dumps``, the placeholders of engine
config helpers, ... are never reached). *Equivalence*: each called stand-in gives upstream's
own result, its function compiled from the wheel's source where it cannot be imported whole
(``vllm/multimodal/utils.py`` and ``vllm/v1/utils.py`` import the engine; the functions
themselves are pure), or compared with the release that has it as a real module (vLLM 0.11's
``vllm.utils`` helpers against 0.33's ``utils.hashing`` / ``utils.math_utils``).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from properties.core.plugin import parse_expected
from properties.core.sources import MARKER
from properties.families.v1 import stand_ins, upstream
from properties.families.v1.closure import Policy
from properties.families.v1.targets import from_modules

ROOT = Path(__file__).resolve().parents[2]


def _wheel(version: str) -> Path:
    wheel = upstream.cached_wheel(version)
    if wheel is None:
        pytest.skip(f"no vllm {version} wheel cached: run `{upstream.FETCH_COMMAND} "
                    f"--version {version}`")
    return wheel


def _function(wheel: Path, member: str, name: str, env: dict[str, Any]) -> Callable[..., Any]:
    """Upstream's function ``name`` of ``member``, compiled alone (its module imports the
    engine; the function uses only ``env``)."""
    with zipfile.ZipFile(wheel) as archive:
        tree = ast.parse(archive.read(member).decode("utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    node.returns = None
    for arg in node.args.args:
        arg.annotation = None
    namespace = dict(env)
    exec(compile(ast.Module([node], []), f"{wheel}/{member}", "exec"), namespace)
    fn: Callable[..., Any] = namespace[name]
    return fn


# --------------------------------------------------------------------------- #
# One resolver, every release; errors that name what is missing
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("version", upstream.SUPPORTED_VERSIONS)
def test_every_release_loads_through_the_closure(version: str) -> None:
    mods = upstream.load_vllm_v1(_wheel(version), version=version)
    assert mods.version == f"vllm {version}"
    assert {"vllm.v1.core.block_pool", "vllm.v1.core.kv_cache_utils"} <= set(mods.real)
    assert set(mods.stubbed) <= {*stand_ins.STUBS, *upstream.block_policy().fallbacks}
    if version == "0.34.0":  # the modules 0.34 added to the closure run for real
        assert "vllm.utils.gc_utils" in mods.real
        numpy = importlib.util.find_spec("numpy") is not None
        assert ("vllm.v1.token_buffer" in mods.real) is numpy


def test_034_api_drift_is_detected() -> None:
    new = upstream.capabilities(upstream.load_vllm_v1(_wheel("0.34.0"), version="0.34.0"))
    old = upstream.capabilities(upstream.load_vllm_v1(_wheel("0.33.0"), version="0.33.0"))
    for cap in ("free_evict_first", "hash_map_by_id", "frontend_hashes"):
        assert getattr(new, cap) and not getattr(old, cap), cap
    assert new.partial_replace and old.partial_replace
    assert (new.hash_block_size, new.partial_blocks, new.evict_blocks) == (True, True, True)


def test_a_release_whose_closure_cannot_load_names_module_and_chain() -> None:
    """Without the request's stand-in, the real ``vllm/v1/request.py`` imports torch, which the
    block level never imports: the error names torch and the chain that reached it."""
    wheel = _wheel("0.34.0")
    base = upstream.block_policy()
    with pytest.raises(upstream.ClosureError) as info:
        upstream.resolve_closure(wheel, policy=Policy(
            stubs={n: b for n, b in base.stubs.items() if n != "vllm.v1.request"},
            fallbacks=base.fallbacks, forbidden=base.forbidden))
    err = info.value
    assert (err.missing, err.chain) == (
        "torch", ("vllm.v1.core.kv_cache_utils", "vllm.v1.request", "torch"))
    assert "cannot load torch: third-party package torch is forbidden" in str(err)
    assert "vllm.v1.core.kv_cache_utils -> vllm.v1.request -> torch" in str(err)


def test_tree_unpacked_from_a_wheel_reports_its_version(tmp_path: Path) -> None:
    """A tree of ``vllm/`` alone (no dist-info): the version comes from ``vllm/_version.py``,
    so xfails entries scoped to the release apply."""
    wheel = _wheel("0.33.0")
    closure = upstream.resolve_closure(wheel)
    members = {"vllm/_version.py"} | {
        f"{name.replace('.', '/')}{'/__init__' if pkg else ''}.py"
        for name, (_, pkg) in closure.real.items()}
    with zipfile.ZipFile(wheel) as archive:
        for member in members:
            archive.extract(member, tmp_path)
    mods = upstream.load_vllm_v1(tmp_path, version="0.33.0")
    assert mods.version == "vllm 0.33.0"
    target = from_modules(mods)
    assert target.version == "0.33.0"
    entries = json.loads((ROOT / "conformance/vllm-0.33.xfails.json").read_text())
    assert entries and all(e.applies(target.version) for e in parse_expected(entries))
    assert not parse_expected([{**entries[0], "versions": ["0.34.0"]}])[0].applies(
        target.version)


# --------------------------------------------------------------------------- #
# The surface of the stand-ins on the paths the suite drives
# --------------------------------------------------------------------------- #

# The stand-in callables the pool's paths call, per release; each is proved equivalent below
# (events: the fields upstream declares; the logger's methods return None).
# ``vllm.envs`` is a value the pool reads: see test_events_with_int_hashes_are_the_same_events.
CALLED = {
    "vllm.logger.init_logger",
    "vllm.distributed.kv_events.BlockStored",
    "vllm.distributed.kv_events.BlockRemoved",
    "vllm.distributed.kv_events.AllBlocksCleared",
    "vllm.multimodal.utils.get_mm_features_in_window",
    "vllm.v1.utils.tensor_data",
    "vllm.utils.cdiv",  # 0.11's fallback
    "vllm.utils.sha256",  # 0.11's fallback
}


def _traced(calls: list[str]) -> Callable[[Callable[[ModuleType], None]],
                                          Callable[[ModuleType], None]]:
    def trace(module: str, name: str, value: Any) -> Any:
        if isinstance(value, type):
            def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
                calls.append(f"{module}.{name}")
                value.__init__(self, *args, **kwargs)

            return type(value.__name__, (value,), {"__init__": __init__,
                                                   "__module__": value.__module__})

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(f"{module}.{name}")
            return value(*args, **kwargs)

        return call

    class Recording(ModuleType):
        """Records every attribute read of the module (``from m import x`` included)."""

        def __getattribute__(self, name: str) -> Any:
            if not name.startswith("__") and name != MARKER:
                calls.append(f"read {ModuleType.__getattribute__(self, '__name__')}.{name}")
            return ModuleType.__getattribute__(self, name)

    def wrap(build: Callable[[ModuleType], None]) -> Callable[[ModuleType], None]:
        def traced_build(module: ModuleType) -> None:
            build(module)
            if module.__name__ == "vllm.envs":  # a value, read when used: record the reads
                module.__class__ = Recording
                return
            for name, value in list(vars(module).items()):
                if not name.startswith("__") and name != MARKER and callable(value):
                    setattr(module, name, trace(module.__name__, name, value))
            lazy = vars(module).get("__getattr__")
            if lazy is not None:
                def __getattr__(name: str) -> Any:
                    value = trace(module.__name__, name, lazy(name))
                    setattr(module, name, value)
                    return value

                module.__getattr__ = __getattr__  # type: ignore[method-assign]

        return traced_build

    return wrap


def _drive(mods: dict[str, ModuleType], hash_fn: Any) -> Iterator[Any]:
    """Every pool operation, with a request carrying every feature; yields the events."""
    utils, pool_mod = mods["v1.core.kv_cache_utils"], mods["v1.core.block_pool"]
    utils.init_none_hash(hash_fn)
    pool_cls = pool_mod.BlockPool
    new_api = "hash_block_size" in pool_cls.__init__.__code__.co_varnames
    pool = (pool_cls(12, True, 2, enable_kv_cache_events=True) if new_api
            else pool_cls(12, True, enable_kv_cache_events=True))
    request = stand_ins.StandInRequest(
        "r", list(range(4)), lora_request=stand_ins.LoraRef(1, "l1", "/l1"), cache_salt="s",
        mm_features=[stand_ins.MMFeature("img", stand_ins.MMPosition(2, 3))],
        prompt_embeds=bytes(range(8)))
    hasher = utils.get_request_block_hasher(2, hash_fn)
    request.block_hashes.extend(hasher(request))
    request.all_token_ids.extend(range(4, 8))  # hashed incrementally, as a request grows
    request.block_hashes.extend(hasher(request))
    assert len(request.block_hashes) == 4
    blocks = pool.get_new_blocks(4)
    extra = {"block_mask": [True] * 4} if hasattr(pool, "cache_partial_block") else {}
    pool.cache_full_blocks(request, blocks, 0, 4, 2, 0, **extra)
    if hasattr(pool, "cache_partial_block"):
        pool.cache_partial_block(request, pool.get_new_blocks(1)[0], 2, 0, 2)
    got = pool.get_cached_block(request.block_hashes[0], [0])
    assert got is not None
    pool.touch(got if new_api else (got,))
    pool.free_blocks(blocks)
    pool.free_blocks(got)
    if hasattr(pool, "evict_blocks"):
        pool.evict_blocks({blocks[1].block_id})
    pool.get_new_blocks(pool.get_num_free_blocks())
    pool.get_usage()
    yield from pool.take_events()
    pool.reset_prefix_cache()


@pytest.mark.parametrize("version", upstream.SUPPORTED_VERSIONS)
def test_stand_ins_called_on_the_suites_paths_are_only_the_proved_ones(version: str) -> None:
    wheel = _wheel(version)
    calls: list[str] = []
    wrap = _traced(calls)
    base = upstream.block_policy()
    policy = Policy(stubs={n: wrap(b) for n, b in base.stubs.items()},
                    fallbacks={n: wrap(b) for n, b in base.fallbacks.items()},
                    forbidden=base.forbidden)
    closure = upstream.resolve_closure(wheel, policy=policy)
    mods, _ = upstream.run_plan(upstream.plan_closure(closure), closure.origin, upstream.ROOTS)
    hashing = closure.real.get("vllm.utils.hashing")
    hash_fn = stand_ins._sha256 if hashing is None else None
    if hash_fn is None:  # the release's own hasher (a fresh load of the same source)
        hash_fn = upstream.hash_function(upstream.load_vllm_v1(wheel, version=version))
    events = list(_drive(mods, hash_fn))
    assert any(type(e).__name__ == "BlockStored" for e in events)
    assert any(type(e).__name__ == "BlockRemoved" for e in events)
    envs_reads = {c for c in calls if c.startswith("read vllm.envs.")}
    assert envs_reads == {"read vllm.envs.VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"}, envs_reads
    assert set(calls) - envs_reads <= CALLED, sorted(set(calls) - envs_reads - CALLED)
    assert "vllm.logger.init_logger" in calls
    if version != "0.11.0":
        assert {"vllm.multimodal.utils.get_mm_features_in_window",
                "vllm.v1.utils.tensor_data"} <= set(calls)


# --------------------------------------------------------------------------- #
# Equivalence of the stand-ins that are called
# --------------------------------------------------------------------------- #

features = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), max_size=6)


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
def test_mm_window_is_upstreams(version: str) -> None:
    import bisect

    real = _function(_wheel(version), "vllm/multimodal/utils.py", "get_mm_features_in_window",
                     {"bisect": bisect})

    @settings(max_examples=300, deadline=None)
    @given(features, st.integers(0, 30), st.integers(0, 30))
    def check(gaps: list[tuple[int, int]], start: int, end: int) -> None:
        feats, offset = [], 0
        for gap, length in gaps:  # sorted, disjoint
            offset += gap
            feats.append(stand_ins.MMFeature("x", stand_ins.MMPosition(offset, length)))
            offset += length
        assert stand_ins._get_mm_features_in_window(feats, start, end) == real(feats, start, end)

    check()


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
def test_tensor_data_hashes_the_bytes_upstream_hashes(version: str) -> None:
    torch = pytest.importorskip("torch", reason="upstream's tensor_data needs torch")
    pytest.importorskip("numpy", reason="upstream's tensor_data needs numpy")
    # A uint8 tensor is in upstream's torch -> numpy dtype map (the fast path, 0.34).
    real = _function(_wheel(version), "vllm/v1/utils.py", "tensor_data",
                     {"torch": torch, "TORCH_DTYPE_TO_NUMPY_DTYPE": {torch.uint8: None}})
    module = ModuleType("v1_utils")
    stand_ins._build_v1_utils(module)
    for data in (b"", bytes(range(7)), bytes(range(256))):
        tensor = torch.tensor(list(data), dtype=torch.uint8)
        for lo, hi in ((0, len(data)), (1, max(1, len(data) - 2))):
            assert bytes(module.tensor_data(data[lo:hi])) == bytes(real(tensor[lo:hi]))


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0", "0.11.0"])
def test_event_records_carry_upstreams_fields(version: str) -> None:
    """A record holds the keyword arguments the pool passed: each is a field upstream's
    struct declares, and every field it does not pass has a default there."""
    wheel = _wheel(version)
    with zipfile.ZipFile(wheel) as archive:
        tree = ast.parse(archive.read("vllm/distributed/kv_events.py").decode("utf-8"))
    declared: dict[str, dict[str, bool]] = {}  # class -> field -> has a default
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in (
                "BlockStored", "BlockRemoved", "AllBlocksCleared"):
            declared[node.name] = {
                s.target.id: s.value is not None for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    mods = upstream.load_vllm_v1(wheel, version=version)
    seen = set()
    for event in _drive({"v1.core.kv_cache_utils": mods.kv_cache_utils,
                         "v1.core.block_pool": mods.block_pool}, upstream.hash_function(mods)):
        name, fields = type(event).__name__, set(vars(event))
        seen.add(name)
        assert fields <= set(declared[name]), (name, fields - set(declared[name]))
        assert all(default for f, default in declared[name].items() if f not in fields)
    assert {"BlockStored", "BlockRemoved"} <= seen


def test_token_slice_fallback_is_upstreams() -> None:
    import array

    real = _function(_wheel("0.34.0"), "vllm/v1/token_buffer.py", "token_slice",
                     {"array": array.array})
    for tokens in ([], list(range(9)), array.array("i", range(9))):
        for start, stop in ((0, 0), (0, 4), (2, 9), (5, 3)):
            assert stand_ins._token_slice(tokens, start, stop) == real(tokens, start, stop)


def test_without_numpy_034_hashes_as_with_its_real_token_buffer() -> None:
    """numpy forbidden (as when it is not installed): the fallback serves ``token_slice`` and
    the same requests get the same block hashes as with upstream's own module."""
    wheel = _wheel("0.34.0")
    base = upstream.block_policy()
    closure = upstream.resolve_closure(wheel, policy=Policy(
        stubs=base.stubs, fallbacks=base.fallbacks, forbidden=base.forbidden | {"numpy"}))
    assert "vllm.v1.token_buffer" in closure.stubs
    assert "numpy" in closure.reasons["vllm.v1.token_buffer"]
    mods, _ = upstream.run_plan(upstream.plan_closure(closure), closure.origin, upstream.ROOTS)
    pytest.importorskip("numpy", reason="the comparison needs upstream's real token_buffer")
    real = upstream.load_vllm_v1(wheel, version="0.34.0")
    assert "vllm.v1.token_buffer" in real.real
    hash_fn = upstream.hash_function(real)
    mods["v1.core.kv_cache_utils"].init_none_hash(hash_fn)

    @settings(max_examples=100, deadline=None)
    @given(st.lists(st.integers(0, 50), max_size=20), st.sampled_from([1, 2, 4]),
           st.none() | st.text(max_size=3))
    def check(tokens: list[int], size: int, salt: str | None) -> None:
        hashes = []
        for utils in (mods["v1.core.kv_cache_utils"], real.kv_cache_utils):
            request = stand_ins.StandInRequest("r", list(tokens), cache_salt=salt)
            hashes.append(utils.get_request_block_hasher(size, hash_fn)(request))
        assert hashes[0] == hashes[1]

    check()


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
def test_events_with_int_hashes_are_the_same_events(version: str) -> None:
    """The envs stand-in's one value the pool reads, ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``,
    is False (upstream's default: True). The pool reads it only where it builds an event
    (``maybe_convert_block_hash``): the same program's events are upstream's int-hash events
    before upstream's own conversion (the 64-bit int view of each hash), so the suite's event
    checks see full keys and nothing else changes."""
    wheel = _wheel(version)

    def load(use_int: bool) -> tuple[dict[str, ModuleType], Any]:
        def build_envs(module: ModuleType) -> None:
            stand_ins.STUBS["vllm.envs"](module)
            module.VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES = use_int

        base = upstream.block_policy()
        closure = upstream.resolve_closure(wheel, policy=Policy(
            stubs={**base.stubs, "vllm.envs": build_envs}, fallbacks=base.fallbacks,
            forbidden=base.forbidden))
        mods, _ = upstream.run_plan(upstream.plan_closure(closure), closure.origin,
                                    upstream.ROOTS)
        return mods, mods["v1.core.kv_cache_utils"].maybe_convert_block_hash

    hash_fn = upstream.hash_function(upstream.load_vllm_v1(wheel, version=version))
    (raw_mods, _), (int_mods, convert) = load(False), load(True)
    raw_events, int_events = list(_drive(raw_mods, hash_fn)), list(_drive(int_mods, hash_fn))
    assert len(raw_events) == len(int_events) > 0
    for raw, as_int in zip(raw_events, int_events, strict=True):
        fields = dict(vars(raw))
        if "block_hashes" in fields:
            fields["block_hashes"] = [convert(h) for h in fields["block_hashes"]]
        if fields.get("parent_block_hash") is not None:
            fields["parent_block_hash"] = convert(fields["parent_block_hash"])
        assert fields == vars(as_int), (fields, vars(as_int))
        assert all(isinstance(h, bytes) for h in getattr(raw, "block_hashes", []))


def test_011_utils_fallback_is_033s_real_helpers() -> None:
    new = upstream.load_vllm_v1(_wheel("0.33.0"), version="0.33.0")
    upstream.load_vllm_v1(_wheel("0.11.0"), version="0.11.0")
    module = ModuleType("vllm_utils")
    stand_ins.ENGINE_UTILS_STUB(module)
    assert new.hashing is not None
    real_cdiv = new.kv_cache_utils.cdiv
    for a in range(-5, 40):
        for b in range(1, 9):
            assert module.cdiv(a, b) == real_cdiv(a, b)
    for value in (None, (b"p", (1, 2, 3), None), ("lora", "l", "/p"), b"\x00" * 33):
        assert module.sha256(value) == new.hashing.sha256(value)


def test_034_is_block_writable_is_checked_against_the_model() -> None:
    """Every snapshot of a 0.34 pool carries ``is_block_writable`` per block, which the model
    checks (one holder, no key); a pool answering it without the key is caught at the first
    cached block."""
    from models.core.invariants import Violation
    from models.families.v1 import ops
    from models.families.v1.invariants import Family
    from models.families.v1.pool_model import PoolConfig
    from properties.families.v1.executor import run_program
    from properties.families.v1.targets import patched_vllm_pool, vllm_v034_block_pool

    _wheel("0.34.0")
    config = PoolConfig(num_blocks=6, hash_block_size=2, group_block_sizes=(2,))
    program = [ops.Req(tokens=(1, 2, 3, 4)), ops.GetNew(2), ops.CacheFull(0, (1, 2), 0, 2, 0),
               ops.Free((2,)), ops.GetNew(1)]
    good = vllm_v034_block_pool()
    ex = run_program(good, config, program)
    assert ex.adapter.snapshot().writable is not None
    broken = patched_vllm_pool("writable-ignores-hash", [(
        "v1.core.block_pool",
        "return not block.is_null and block.ref_cnt == 1 and block.block_hash is None",
        "return not block.is_null and block.ref_cnt == 1")], version="0.34.0")
    with pytest.raises(Violation, match="is_block_writable") as info:
        run_program(broken, config, program)
    assert info.value.family is Family.CACHE
