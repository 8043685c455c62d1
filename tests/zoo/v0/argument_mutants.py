"""Device-aware allocators with argument-validation bugs (misuse): each accepts a
malformed argument, or changes state before refusing one. Not part of ``ZOO``: they exercise
the ``misuse`` rules' malformed calls (``models.families.v0.operations.Malformed``) and are run by
``tests/hardening/test_malformed_arguments.py``. Patches of
``prefixcache/cpu_gpu_block_allocator.py`` (see ``tests.zoo.patching``), each change marked
``# BUG``; every factory is a module attribute, so ``tests.zoo.v0.argument_mutants:<name>`` is a
target spec.
"""

from __future__ import annotations

from typing import Any

from tests.zoo.patching import Patch, claims, factory, register

_DEVICE = "cpu_gpu_block_allocator"
_ALLOCATOR_FOR = "allocator = self._allocators.get(device) if isinstance(device, Device) else None"

PATCHES: dict[str, tuple[Patch, ...]] = {
    # Routes ``device=None`` to the GPU (a "default device" convenience the API does not
    # have) instead of raising ``UnknownDeviceError``.
    "device_none_means_gpu": (Patch(
        _DEVICE, "CpuGpuBlockAllocator._allocator_for", _ALLOCATOR_FOR,
        "device = Device.GPU if device is None else device  # BUG\n" + _ALLOCATOR_FOR),),
    # Normalizes token ids with ``int()`` (meant for numpy ints), which turns ``True`` into 1
    # and ``1.5`` into 1 instead of refusing them.
    "tokens_coerced": (
        Patch(_DEVICE, "", "def _share_block_id(",
              "def _coerced(tokens: Any) -> Any:\n"
              "    if isinstance(tokens, list) and all(isinstance(t, int | float)\n"
              "                                        for t in tokens):\n"
              "        return [int(t) for t in tokens]  # BUG: bools and floats pass as ints\n"
              "    return tokens\n\n\n"
              "def _share_block_id("),
        Patch(_DEVICE, "CpuGpuBlockAllocator.allocate_immutable_block",
              "prev_block, token_ids, extra_hash=extra_hash",
              "prev_block, _coerced(token_ids), extra_hash=extra_hash"),
        Patch(_DEVICE, "CpuGpuBlockAllocator.allocate_immutable_blocks",
              "prev_block, block_token_ids, extra_hash=extra_hash",
              "prev_block, [_coerced(c) for c in block_token_ids] if isinstance(block_token_ids, "
              "list) else block_token_ids, extra_hash=extra_hash"),
    ),
    # Checks that the source and destination differ only after swapping the blocks out, so a
    # refused swap to the same device leaves them without ids.
    "swap_same_device_late": (Patch(
        _DEVICE, "CpuGpuBlockAllocator.swap", "if src is dst:",
        "if src is dst and isinstance(blocks, list):\n"
        "    src.swap_out(blocks)  # BUG: the check below came first\n"
        "if src is dst:"),),
}

for _name, _patches in PATCHES.items():
    register(_name, _patches)
    globals()[_name] = factory(_name, __name__)


def prefixcache_claims(target_factory: Any) -> dict[str, Any]:
    """The bundled allocator's claims (typed errors, atomic): read by ``load_target``."""
    return claims(getattr(target_factory, "__name__", "?"))
