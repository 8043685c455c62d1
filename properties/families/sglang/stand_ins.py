"""Stand-ins for the parts of the SGLang engine that ``sglang/srt/mem_cache`` imports.

The loader (:mod:`properties.families.sglang.upstream`) executes ``sglang/srt/mem_cache/**``
(but ``memory_pool.py``), ``sglang/srt/environ.py``, ``sglang/srt/rust_extensions/**`` and
``sglang/srt/session/streaming_session.py`` (the unified cache calls it on every match) from the
wheel under their upstream names. Everything else those modules import at module level is served
from here:
``sglang`` and ``sglang.srt`` themselves are bare packages (the real ``sglang/__init__.py`` pulls
in the whole engine), and each other name is one of two kinds.

* A **placeholder** (:class:`Placeholder`): a class that raises :class:`StandInUsed` when it is
  instantiated or called. Module-level code may import it, subclass it, or put it in an
  annotation; ``isinstance(x, P)`` is False for every object the suite makes, which is what the
  real answer is (the suite never builds GPU pools, HiCache controllers or streaming sessions).
  A placeholder cannot change what the suite observes: any path that *uses* one fails loudly
  with :class:`StandInUsed` naming it, so a test that passes never went through one.
* A **value stand-in**: a small re-implementation of a pure helper whose behaviour the tree and
  allocator paths the suite drives depend on. Each is listed in :data:`VALUE_STAND_INS` with why
  it is faithful on those paths (CPU only, no triton, single rank, no metrics, no KV events).

Third-party modules the engine needs only on other paths (``sgl_kernel``, ``triton``,
``psutil``, ``tomli``) are placeholders too when they are not installed; ``torch``, ``numpy``
and ``msgspec`` are real (the tree core's structs and the allocators' tensors need them).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any

__all__ = [
    "PLACEHOLDERS",
    "THIRD_PARTY_PLACEHOLDERS",
    "VALUE_STAND_INS",
    "Placeholder",
    "StandInUsed",
    "stubs",
]


class StandInUsed(RuntimeError):
    """A placeholder for an engine part was instantiated or called: the path left the tree and
    allocator code the suite loads, so its result would not be upstream's."""


class Placeholder:
    """Base of every placeholder class; instantiating (calling) one raises StandInUsed."""

    _stand_in_name = "?"

    def __new__(cls, *args: object, **kwargs: object) -> Placeholder:
        raise StandInUsed(f"{cls._stand_in_name} is a stand-in and was used")


def placeholder(module: str, name: str) -> type[Placeholder]:
    """A fresh placeholder class named ``module.name``."""
    return type(name, (Placeholder,), {"_stand_in_name": f"{module}.{name}",
                                       "__module__": module, "__qualname__": name})


# --------------------------------------------------------------------------- #
# Value stand-ins
# --------------------------------------------------------------------------- #


def _false(*args: object, **kwargs: object) -> bool:
    return False


def get_bool_env_var(name: str, default: str = "false") -> bool:
    """Upstream's: true for "true"/"1" (any case) in the environment, else false."""
    return os.getenv(name, default).lower() in ("true", "1")


def next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 0 else 1


def ceil_div(x: int, y: int) -> int:
    return -(-x // y)


def ceil_align(x: int, y: int) -> int:
    return ceil_div(x, y) * y


def get_num_new_pages(seq_lens: Any, page_size: int, prefix_lens: Any = None,
                      decode: bool = False) -> int:
    """Pages a batch extension needs: sum over requests of ceil(seq/ps) - ceil(prefix/ps)
    (decode: prefix = seq - 1). Only ``alloc_extend``/``alloc_decode`` call it."""
    import torch

    if prefix_lens is None or decode:
        prefix_lens = seq_lens - 1
    seq_pages = (seq_lens + page_size - 1) // page_size
    prefix_pages = (prefix_lens + page_size - 1) // page_size
    return int(torch.sum(seq_pages - prefix_pages).item())


def get_device_module() -> Any:
    """Upstream returns ``torch.cpu`` on a machine with no accelerator (this one)."""
    import torch

    return torch.cpu


def assert_int64_array(values: Any, name: str) -> None:
    """Upstream's check that the Rust core's token arrays are ``array('q')``; raises ValueError
    instead of asserting, so it holds under -O too."""
    from array import array

    if not (isinstance(values, array) and values.typecode == "q"):
        raise ValueError(f"{name} must be array('q') with 8-byte items")


@dataclass(frozen=True)
class _Capabilities:
    supports_triton: bool = False


@dataclass(frozen=True)
class _CpuPlatform:
    """``current_platform`` on a CPU-only host: no triton, so allocators run the torch paths."""

    capabilities: _Capabilities = field(default_factory=_Capabilities)
    device_type: str = "cpu"

    def is_cuda(self) -> bool:
        return False

    def is_cpu(self) -> bool:
        return True


def _parallel() -> SimpleNamespace:
    """A single rank: world sizes 1, rank 0 (the suite drives one process)."""
    return SimpleNamespace(tp_size=1, tp_rank=0, pp_size=1, pp_rank=0, dp_size=1,
                           attn_tp_size=1, attn_tp_rank=0, attn_cp_size=1, attn_cp_rank=0,
                           enable_dp_attention=False)


def _observability() -> SimpleNamespace:
    """No extra metric labels (metrics are off in every cache the suite builds)."""
    return SimpleNamespace(extra_metric_labels=None)


def _spec() -> SimpleNamespace:
    """No speculative decoding (the default): only ``speculative_algorithm`` is read."""
    return SimpleNamespace(speculative_algorithm=None)


def _serving() -> SimpleNamespace:
    """The default serving flags the release path reads (thinking tokens are cached)."""
    return SimpleNamespace(strip_thinking_cache=False)


def rank_consensus(func: Any = None, **kwargs: object) -> Any:
    """Upstream's decorator with its checker disabled (its default,
    SGLANG_ENABLE_RANK_CONSENSUS_CHECKER unset): the function itself, unwrapped."""
    if func is None:
        return lambda inner: inner
    return func


class StorageMedium(str, enum.Enum):  # noqa: UP042 - as upstream declares it
    """Upstream's storage tiers of KV events (a plain declaration)."""

    GPU = "GPU"
    CPU = "CPU_PINNED"
    DISK = "DISK"
    EXTERNAL = "EXTERNAL"


def _kv_event_seed(*args: object, **kwargs: object) -> int:
    return 0


@dataclass(frozen=True)
class ValueStandIn:
    value: object
    why: str


VALUE_STAND_INS: dict[str, dict[str, ValueStandIn]] = {
    "sglang.srt.utils": {
        "get_bool_env_var": ValueStandIn(get_bool_env_var, "same rule as upstream's; only "
                                         "SGLANG_DEBUG_MEMORY_POOL is read, unset in the suite"),
        "get_num_new_pages": ValueStandIn(get_num_new_pages, "upstream's arithmetic; used only "
                                          "by alloc_extend/alloc_decode"),
        "next_power_of_2": ValueStandIn(next_power_of_2, "upstream's one-liner; only a triton "
                                        "launch argument, never reached on CPU"),
        "ceil_div": ValueStandIn(ceil_div, "integer ceiling, as upstream"),
        "is_hip": ValueStandIn(_false, "no ROCm device here"),
        "is_cuda": ValueStandIn(_false, "no CUDA device here"),
        "is_npu": ValueStandIn(_false, "no NPU here"),
        "is_xpu": ValueStandIn(_false, "no XPU here"),
        "is_mps": ValueStandIn(_false, "no MPS here"),
        "get_device_module": ValueStandIn(get_device_module, "torch.cpu, as upstream on a "
                                          "host without accelerators"),
        "assert_int64_array": ValueStandIn(assert_int64_array, "the same check, as an error"),
    },
    "sglang.srt.layers.attention.dsa.utils": {
        "aiter_can_use_preshuffle_paged_mqa": ValueStandIn(_false, "no ROCm/aiter here; read "
                                                           "only by DSA index-key pools"),
    },
    "sglang.srt.utils.common": {
        "ceil_align": ValueStandIn(ceil_align, "integer ceiling to a multiple, as upstream"),
        "is_npu": ValueStandIn(_false, "no NPU here"),
        "get_num_new_pages": ValueStandIn(get_num_new_pages, "as sglang.srt.utils's (0.5.18 "
                                          "imports it from here)"),
    },
    "sglang.srt.utils.rank_consensus_checker": {
        "rank_consensus": ValueStandIn(rank_consensus, "upstream returns the function "
                                       "unchanged while its checker is off (the default)"),
    },
    "sglang.srt.platforms": {
        "current_platform": ValueStandIn(_CpuPlatform(), "a CPU host without triton: the "
                                         "allocators take their pure-torch paths, as they do "
                                         "upstream on such a host"),
    },
    "sglang.srt.runtime_context": {
        "get_parallel": ValueStandIn(_parallel, "one rank, as the suite runs"),
        "get_observability": ValueStandIn(_observability, "read only when metrics are on; "
                                          "they are off"),
        "get_spec": ValueStandIn(_spec, "no speculative decoding (the default); read by the "
                                 "request release path (release_kv_cache) only; any other "
                                 "field is an AttributeError"),
        "get_serving": ValueStandIn(_serving, "strip_thinking_cache off (the default); read "
                                    "by the request release path only; any other field is an "
                                    "AttributeError"),
    },
    "sglang.srt.disaggregation.kv_events": {
        "kv_event_namespace_seed": ValueStandIn(_kv_event_seed, "KV events are off in every "
                                                "cache the suite builds; events carry no "
                                                "state the tree reads back"),
        "namespaced_block_hash": ValueStandIn(_kv_event_seed, "as kv_event_namespace_seed"),
        "StorageMedium": ValueStandIn(StorageMedium, "upstream's enum, passed only to the "
                                      "(disabled) KV event recorder"),
    },
}

# Names that are only imported (for annotations, base classes, isinstance checks, or paths
# the suite never takes: GPU kernels, HiCache, sessions, SWA/Mamba pools, metrics, P2P).
PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "sglang.kernels.ops.kvcache": ("dsa_index_k_cache",),
    "sglang.kernels.ops.kvcache.mla_buffer": (
        "get_mla_kv_buffer_kernel", "get_mla_kv_buffer_triton",
        "set_mla_kv_buffer_dcp_sharded_triton", "set_mla_kv_buffer_fp8_quant_kernel",
        "set_mla_kv_buffer_kernel", "set_mla_kv_buffer_triton",
        "set_mla_kv_buffer_triton_fp8_quant", "set_mla_kv_scale_buffer_kernel",
        "set_mla_kv_scale_buffer_triton"),
    "sglang.kernels.ops.kvcache.hicache": (
        "can_use_hicache_jit_kernel", "can_use_write_back_jit_kernel",
        "transfer_hicache_all_layer", "transfer_hicache_all_layer_mla",
        "transfer_hicache_all_layer_mla_staged_lf_pf", "transfer_hicache_all_layer_staged_lf_pf",
        "transfer_hicache_one_layer", "transfer_hicache_one_layer_mla"),
    "sglang.kernels.ops.kvcache.hisparse": ("transfer_cache_dsv4_mla",),
    "sglang.kernels.ops.memory.allocator": ("alloc_decode_kernel", "alloc_extend_kernel",
                                            "get_and_clear_swa_pages"),
    "sglang.kernels.ops.memory.common": ("_get_last_loc_safe_kernel", "get_last_loc_kernel"),
    "sglang.kernels.ops.attention.dsa.dequant_k_cache": ("dequantize_k_cache_paged_dsa",),
    "sglang.srt.constants": ("GPU_MEMORY_TYPE_KV_CACHE",),
    "sglang.srt.configs.mamba_utils": ("BaseLinearStateParams",),
    "sglang.srt.debug_utils.cuda_coredump": (),
    "sglang.srt.disaggregation.kv_events": (
        "AllBlocksCleared", "BlockRemoved", "BlockStored", "BlockStoredMetadata",
        "BlockStoredWithMetadata"),
    "sglang.srt.distributed.communication_tags": ("P2PTag",),
    "sglang.srt.distributed.device_communicators.pynccl": ("PyNcclCommunicator",),
    "sglang.srt.distributed.device_communicators.pynccl_allocator": (
        "allocate_symmetric_buffer",),
    "sglang.srt.distributed.device_communicators.pynccl_wrapper": (
        "NCCLLibrary", "NCCL_CTA_POLICY_ZERO"),
    "sglang.srt.distributed.parallel_state": ("in_the_same_node_as",),
    "sglang.srt.layers.attention.dsa.utils": (
        "INDEXER_K_CACHE_PRESHUFFLE_TILE",),
    "sglang.srt.hardware_backend.npu.allocator_npu": ("NPUPagedTokenToKVPoolAllocator",),
    "sglang.srt.layers.dcp.layout": ("maybe_dcp_kernel_indices",),
    "sglang.srt.layers.radix_attention": ("RadixAttention",),
    "sglang.srt.managers.cache_controller": (
        "CacheOperation", "HICACHE_WRITE_STAGING_POOL_FRACTION", "HiCacheController",
        "LayerDoneCounter", "PrefetchAck", "StorageOperation"),
    "sglang.srt.mem_cache.memory_pool": (
        "DSATokenToKVPool", "GB", "GPU_MEMORY_TYPE_KV_CACHE", "HybridLinearKVPool",
        "HybridReqToTokenPool", "KVCache", "KVWriteLoc", "KvBufferDesc", "MHATokenToKOnlyPool",
        "MHATokenToKVPool", "MHATokenToKVPoolMXFP8", "MLATokenToKVPool", "MLATokenToKVPoolFP4",
        "MambaPool", "MiniMaxSparseKVPool", "NoOpMHATokenToKVPool", "PageMajorMHATokenToKVPool",
        "RadixAttention", "ReqToTokenPool", "UnquantizedKVCacheMethod",
        "get_minimax_sparse_index_dtype", "get_tensor_size_bytes", "maybe_detect_oob",
        "unwrap_write_loc", "write_loc_is_physical"),
    "sglang.srt.observability.metrics_collector": (
        "RadixCacheMetricsCollector", "STAT_LOGGER_ROLE_RADIX_CACHE",
        "STAT_LOGGER_ROLE_STORAGE", "StorageMetrics", "StorageMetricsCollector",
        "radix_cache_metric_labels", "resolve_collector_class"),
    "sglang.srt.runtime_context": (
        "get_disagg", "get_exec", "get_memory", "get_model", "get_schedule", "get_platform",
        "mamba_cache_chunk_size", "mamba_checkpoint_grid", "max_speculative_num_draft_tokens"),
    "sglang.srt.managers.schedule_batch": ("ReqKvInfo", "Req", "FINISH_ABORT"),
    "sglang.srt.speculative.spec_info": ("SpeculativeAlgorithm",),
    "sglang.srt.utils": ("broadcast_pyobj",),
    # The Unified SWA component accepts this allocator beside the SWA one (isinstance only);
    # the suite builds the SWA one.
    "sglang.srt.mem_cache.allocator.hisparse": ("DeepSeekV4HiSparseTokenToKVPoolAllocator",),
    # The Unified SWA component and the Rust adapter ask whether the allocator is the
    # unified-memory SWA composite (isinstance only); the suite builds the static SWA one.
    "sglang.srt.mem_cache.allocator.unified_hybrid_swa": ("UnifiedSWAAllocatorBase",),
    # SWA allocator: only its page-size > 1 SWA-tail path calls it; the SWA level runs page 1.
    "sglang.srt.utils.common": ("async_h2d",),
    "sglang.srt.utils.poll_timer": ("PollTimer",),
}

# Third-party modules imported at module level by HiCache/host-pool/build paths only; served
# as placeholders when not installed.
THIRD_PARTY_PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "sgl_kernel": (),
    "sgl_kernel.kvcacheio": (),
    "sgl_kernel_npu": (),
    "triton": (),
    "triton.language": (),
    "psutil": (),
    "tomli": (),
}


class _Module(ModuleType):
    """A stand-in module: its listed names only; any other name is an AttributeError that
    names the module, so a new upstream import fails clearly at load time."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"stand-in module {self.__name__} has no {name!r} (a new "
                             "upstream import: add it to properties.families.sglang.stand_ins)")


def _builder(module: str, values: Mapping[str, object], names: tuple[str, ...]
             ) -> Callable[[ModuleType], None]:
    def build(target: ModuleType) -> None:
        target.__class__ = _Module
        for name in names:
            setattr(target, name, placeholder(module, name))
        for name, value in values.items():
            setattr(target, name, value)
    return build


def stubs(missing_third_party: Callable[[str], bool]) -> dict[str, Callable[[ModuleType], None]]:
    """Stand-in builders by dotted name. A third-party placeholder is included only when
    ``missing_third_party(top-level name)`` (the real package wins when installed)."""
    out: dict[str, Callable[[ModuleType], None]] = {}
    modules = set(PLACEHOLDERS) | set(VALUE_STAND_INS)
    for module in sorted(modules):
        values = {n: v.value for n, v in VALUE_STAND_INS.get(module, {}).items()}
        out[module] = _builder(module, values, PLACEHOLDERS.get(module, ()))
    for module, names in THIRD_PARTY_PLACEHOLDERS.items():
        if missing_third_party(module.split(".")[0]):
            out[module] = _builder(module, {}, names)
    return out


