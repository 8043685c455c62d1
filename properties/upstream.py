"""Third-party targets by name, for every family: the specs users pass to ``--allocator``
(``prefixcache check``, the pytest plugin), and ``python -m properties.upstream fetch``.

Neither core nor family: the one module that names each family's upstream loaders, so users
write ``properties.upstream:<target>`` whatever the API generation.

- v0 block manager: ``vllm_v0_allocator`` (vLLM 0.8's code, the ``vllm-block`` distribution),
  ``aphrodite_allocator`` (Aphrodite 0.6.5, read from its wheel).
- v1 ``BlockPool``: ``vllm_v1_block_pool`` (the newest supported release, vLLM 0.34.0),
  ``vllm_v034_block_pool``, ``vllm_v033_block_pool``, ``vllm_v011_block_pool`` (those releases),
  read from the wheels without torch.
- v1 ``KVCacheManager`` (the request level, family ``v1-manager``): ``vllm_v1_manager`` (vLLM
  0.34.0), ``vllm_v034_manager``, ``vllm_v033_manager``, and ``vllm_v1_manager_on_bundled_pool``
  (0.33.0's manager building the bundled ``BlockPool``); they need torch (the CPU build).
- CPU KV offloading manager (the offload family): ``vllm_cpu_offload`` (0.34.0; the policy is
  the allocator type, ``lru`` or ``arc``), ``vllm_cpu_offload_arc`` (0.34.0 under ``arc``),
  ``vllm_v033_cpu_offload`` and ``vllm_v011_cpu_offload`` (0.11.0's ``LRUOffloadingManager``),
  read from the wheels without torch.
- SGLang: ``load_sglang`` (0.5.23, the default, and 0.5.18), its radix caches and token-slot
  allocators read from the wheel; ``fetch sglang [--version V]`` downloads it. Targets of the
  sglang family (tree level, FULL component): ``sglang_radix_cache`` (0.5.23's default,
  ``UnifiedRadixCache`` with the Python tree core), ``sglang_radix_cache_rust`` (its Rust tree
  core), ``sglang_classic_radix_cache`` (0.5.23's classic ``RadixCache``),
  ``sglang_v0518_radix_cache`` (0.5.18's default, the classic tree).
- NVIDIA Dynamo's KV router (``ai-dynamo-runtime`` 1.6.1, not a target: the v1 pool judge
  replays the pool's KV events into its ``RadixTree`` when cached): ``fetch dynamo``.
- The loaders themselves (``load_vllm_v0``, ``load_aphrodite``, ``load_vllm_v1``,
  ``load_sglang``): the upstream modules, for code that drives them directly.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from properties.families.offload.targets import (
    vllm_cpu_offload,
    vllm_cpu_offload_arc,
    vllm_v011_cpu_offload,
    vllm_v033_cpu_offload,
)
from properties.families.sglang import upstream as sglang
from properties.families.sglang.targets import TreeTarget, upstream_swa_target, upstream_target
from properties.families.sglang.upstream import CLASSIC_VERSION, DEFAULT_VERSION, load_sglang
from properties.families.v0 import upstream as v0
from properties.families.v0.upstream import (
    aphrodite_allocator,
    load_aphrodite,
    load_vllm_v0,
    vllm_v0_allocator,
)
from properties.families.v1 import dynamo
from properties.families.v1 import upstream as v1
from properties.families.v1.request.target import (
    vllm_v033_manager,
    vllm_v034_manager,
    vllm_v1_manager,
    vllm_v1_manager_on_bundled_pool,
)
from properties.families.v1.targets import (
    vllm_v011_block_pool,
    vllm_v033_block_pool,
    vllm_v034_block_pool,
    vllm_v1_block_pool,
)
from properties.families.v1.upstream import load_vllm_v1

__all__ = [
    "aphrodite_allocator",
    "load_aphrodite",
    "load_sglang",
    "load_vllm_v0",
    "load_vllm_v1",
    "main",
    "sglang_classic_radix_cache",
    "sglang_classic_request_radix_cache",
    "sglang_radix_cache",
    "sglang_radix_cache_rust",
    "sglang_request_radix_cache",
    "sglang_request_radix_cache_rust",
    "sglang_swa_radix_cache",
    "sglang_swa_radix_cache_rust",
    "sglang_v0518_radix_cache",
    "sglang_v0518_request_radix_cache",
    "sglang_v0518_swa_radix_cache",
    "vllm_cpu_offload",
    "vllm_cpu_offload_arc",
    "vllm_v0_allocator",
    "vllm_v011_block_pool",
    "vllm_v011_cpu_offload",
    "vllm_v033_block_pool",
    "vllm_v033_cpu_offload",
    "vllm_v033_manager",
    "vllm_v034_block_pool",
    "vllm_v034_manager",
    "vllm_v1_block_pool",
    "vllm_v1_manager",
    "vllm_v1_manager_on_bundled_pool",
]


def sglang_radix_cache() -> TreeTarget:
    """SGLang 0.5.23's default tree: ``UnifiedRadixCache`` (FULL), Python tree core."""
    return upstream_target(DEFAULT_VERSION, "unified-python")


def sglang_radix_cache_rust() -> TreeTarget:
    """SGLang 0.5.23's ``UnifiedRadixCache`` (FULL) with the Rust tree core."""
    return upstream_target(DEFAULT_VERSION, "unified-rust")


def sglang_classic_radix_cache() -> TreeTarget:
    """SGLang 0.5.23's classic ``RadixCache`` (the caller frees insert's duplicates)."""
    return upstream_target(DEFAULT_VERSION, "classic")


def sglang_v0518_radix_cache() -> TreeTarget:
    """SGLang 0.5.18's default tree, the classic ``RadixCache``."""
    return upstream_target(CLASSIC_VERSION, "classic")


def sglang_request_radix_cache() -> TreeTarget:
    """SGLang 0.5.23's default tree (``UnifiedRadixCache``, FULL, Python tree core) judged
    through its request API (``checkpoint``, ``release_kv_cache``): the request level."""
    return upstream_target(DEFAULT_VERSION, "unified-python", "request")


def sglang_request_radix_cache_rust() -> TreeTarget:
    """SGLang 0.5.23's ``UnifiedRadixCache`` (FULL, Rust tree core) at the request level."""
    return upstream_target(DEFAULT_VERSION, "unified-rust", "request")


def sglang_classic_request_radix_cache() -> TreeTarget:
    """SGLang 0.5.23's classic ``RadixCache`` at the request level (its ``checkpoint``)."""
    return upstream_target(DEFAULT_VERSION, "classic", "request")


def sglang_v0518_request_radix_cache() -> TreeTarget:
    """SGLang 0.5.18's classic ``RadixCache`` at the request level (``cache_unfinished_req``,
    ``cache_finished_req`` through ``release_kv_cache``)."""
    return upstream_target(CLASSIC_VERSION, "classic", "request")


def sglang_swa_radix_cache() -> TreeTarget:
    """SGLang 0.5.23's ``UnifiedRadixCache`` with FULL + SWA, Python tree core."""
    return upstream_swa_target(DEFAULT_VERSION, "swa-unified-python")


def sglang_swa_radix_cache_rust() -> TreeTarget:
    """SGLang 0.5.23's ``UnifiedRadixCache`` with FULL + SWA, Rust tree core."""
    return upstream_swa_target(DEFAULT_VERSION, "swa-unified-rust")


def sglang_v0518_swa_radix_cache() -> TreeTarget:
    """SGLang 0.5.18's ``SWARadixCache`` (FULL + SWA)."""
    return upstream_swa_target(CLASSIC_VERSION, "swa-classic")


USAGE = """usage: python -m properties.upstream {fetch,info} [vllm|aphrodite] [--dest DIR]
       python -m properties.upstream {fetch,info} vllm-v1 [--version VERSION] [...]
       python -m properties.upstream {fetch,info} sglang [--version VERSION]
       python -m properties.upstream {fetch,info} dynamo      (the KV router, ai-dynamo-runtime)"""


def main(argv: Sequence[str] | None = None) -> int:
    """``fetch``/``info`` of a v0 flavour (``vllm``, ``aphrodite``), ``vllm-v1`` or ``sglang``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) >= 2 and args[1] == "vllm-v1":
        return v1.main([args[0], *args[2:]])
    if len(args) >= 2 and args[1] == "dynamo":
        return dynamo.main([args[0], *args[2:]])
    if len(args) >= 2 and args[1] == "sglang":
        return sglang.main([args[0], *args[2:]])
    if not args or args[0] not in ("fetch", "info"):
        print(USAGE, file=sys.stderr)
        return 2
    return v0.main(args)


if __name__ == "__main__":
    raise SystemExit(main())
