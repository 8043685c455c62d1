"""Errors of the wrong builtin class: typed, refused without a trace, yet an engine's
``except`` clause written for the class docs/API.md pins
(:mod:`models.families.v0.error_classes`) misses them. Each change is marked ``# BUG`` in the
patched source.
"""

from __future__ import annotations

from tests.zoo.patching import Patch

#: ``NoFreeBlocksError`` is a ``RuntimeError`` (docs/API.md: a ``ValueError``). The patch changes
#: ``errors.py``, so the whole package is copied (its errors and ``Device`` are the copy's).
RUNTIME_NO_FREE_BLOCKS = (Patch("errors", "NoFreeBlocksError", "(PrefixCacheError, ValueError):",
                                "(PrefixCacheError, RuntimeError):  # BUG: API: ValueError"),)

#: ``evictor.update`` of a non-candidate raises a ``ValueError`` (docs/API.md: ``KeyError``).
VALUE_ERROR_UPDATE = (Patch(
    "evictor", "LRUEvictor.update",
    'raise UnknownBlockIdError(f"block {block_id} is not an eviction candidate")',
    'raise InvalidArgumentError(f"block {block_id} is not a candidate")  # BUG: not a KeyError'),)

#: A device that is not a ``Device`` is refused with a ``ValueError`` (docs/API.md: ``KeyError``).
VALUE_ERROR_DEVICE = (Patch(
    "cpu_gpu_block_allocator", "CpuGpuBlockAllocator._allocator_for",
    "allocator = self._allocators.get(device) if isinstance(device, Device) else None",
    "if not isinstance(device, Device):\n"
    '    raise InvalidArgumentError(f"unknown device {device!r}")  # BUG: not a KeyError\n'
    "allocator = self._allocators.get(device) if isinstance(device, Device) else None"),)
