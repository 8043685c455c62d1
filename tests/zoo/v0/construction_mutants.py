"""Broken constructors (docs/API.md §4 and §5): the allocator every program builds with
``CpuGpuBlockAllocator.create`` is right, but explicit block ids or malformed constructor
arguments are mishandled. Only ``Construct`` (an allocator built beside the program's) reaches
these. Each change is marked ``# BUG`` in the patched source.
"""

from __future__ import annotations

from tests.zoo.patching import Patch

_INIT = "PrefixCachingBlockAllocator.__init__"
_FIRST_CHECK = 'check_count(num_blocks, "num_blocks")'

#: Explicit block ids are cleaned instead of checked: duplicates, non-ints and ids out of
#: range are dropped silently and the count is taken from what is left.
LENIENT_BLOCK_IDS = (Patch(
    "prefix_caching_block", _INIT, _FIRST_CHECK,
    "if block_ids is not None:  # BUG: bad ids dropped, not refused\n"
    "    block_ids = [i for i in dict.fromkeys(block_ids) if type(i) is int and 0 <= i < 2**64]\n"
    "    num_blocks = len(block_ids)\n" + _FIRST_CHECK),)

#: Valid explicit block ids are taken as the contiguous ascending range from the smallest
#: (what ``create`` passes), so gaps and the order given are lost.
CONTIGUOUS_IDS = (Patch(
    "prefix_caching_block", _INIT, _FIRST_CHECK,
    "if block_ids is not None:\n"
    "    block_ids = list(block_ids)\n"
    "    if all(type(i) is int for i in block_ids) \\\n"
    "            and len(set(block_ids)) == len(block_ids) == num_blocks:\n"
    "        start = min(block_ids, default=0)\n"
    "        block_ids = list(range(start, start + num_blocks))  # BUG: assumes a range\n"
    + _FIRST_CHECK),)

#: ``create`` builds naive allocators for any ``allocator_type`` it does not know, instead of
#: refusing it (a typo in an engine's config silently turns prefix caching off).
ANY_TYPE_CREATES = (Patch("cpu_gpu_block_allocator", "CpuGpuBlockAllocator.create",
                          'if allocator_type == "naive":',
                          'if allocator_type != "prefix_caching":  # BUG: unknown -> naive'),)
