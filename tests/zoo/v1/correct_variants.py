"""The false-alarm zoo, v1: bundled ``BlockPool`` variants that are *correct but different*.

Each is the bundled pool with a small textual patch (:mod:`tests.zoo.v1.bundled_copy`) taking
a choice the v1 contract leaves open (``models/families/v1/``) another way. The block-level
machine must pass them (``tests/test_correct_variants.py``); :func:`observe` runs a short
program whose result differs from the bundled pool's, which ``difference`` records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from models.families.v1 import ops
from models.families.v1.pool_model import PoolConfig
from properties.families.v1.executor import run_program
from tests.zoo.patching import Patch
from tests.zoo.v1.bundled_copy import bundled_pool, patched_bundled_pool

BP = "v1.core.block_pool"


@dataclass(frozen=True)
class Variant:
    """A correct pool: its patches, the open choice it takes, and the program showing it
    (``program``; ``observed`` picks the result to compare) with (bundled, variant) results."""

    name: str
    choice: str
    patches: tuple[Patch, ...]
    program: tuple[ops.Op, ...]
    difference: tuple[object, object]


#: One group of block size 2 (hash block size 2), events on.
CONFIG = PoolConfig(num_blocks=4, hash_block_size=2, group_block_sizes=(2,), events=True)
_TOKENS = (1, 2, 3, 4)

VARIANTS: tuple[Variant, ...] = (
    # Several blocks under one key (duplicates): a lookup may answer any of them
    # (PoolModel.lookup). The variant answers the newest, the bundled pool the first cached.
    Variant(
        "lookup_answers_newest_duplicate",
        "get_cached_block answers the last-cached block of a duplicated key",
        (Patch(BP, "BlockHashToBlockMap.get_one_block", "return next(iter(blocks.values()))",
               "return next(reversed(blocks.values()))  # VARIANT: the newest duplicate"),
         # The group-0 mirror (the lookup's hot path) follows the newest block too.
         Patch(BP, "BlockHashToBlockMap._set", "else next(iter(value.values()))",
               "else next(reversed(value.values()))  # VARIANT: the newest duplicate"),
         Patch(BP, "BlockHashToBlockMap.insert", "blocks[block.block_id] = block",
               "blocks[block.block_id] = block\n"
               "self._set(key, blocks)  # VARIANT: the mirror takes the newest duplicate"),
         Patch(BP, "BlockHashToBlockMap.pop",
               "self._group0[key[:-4]] = next(iter(blocks.values()))",
               "self._group0[key[:-4]] = next(reversed(blocks.values()))  # VARIANT"),
         Patch(BP, "BlockPool.get_cached_block", "hit = next(iter(hit.values()))",
               "hit = next(reversed(hit.values()))  # VARIANT: the newest duplicate"),
         Patch(BP, "BlockPool.get_cached_block", "blocks = next(iter(blocks.values()))",
               "blocks = next(reversed(blocks.values()))  # VARIANT: the newest duplicate")),
        # Two requests with the same prompt cache their first block on ids 1 and 2.
        (ops.Req(_TOKENS), ops.Req(_TOKENS), ops.GetNew(2),
         ops.CacheFull(0, (1,), 0, 1, 0), ops.CacheFull(1, (2,), 0, 1, 0),
         ops.Lookup(0, 0, (0,))),
        ([1], [2])),
    # Events: a router replaying them must learn exactly the cache map (models.families.v1.
    # events); how stored blocks are batched into BlockStored events is open. The variant
    # announces one block per event, the bundled pool one event per run of blocks.
    Variant(
        "one_stored_event_per_block",
        "cache_full_blocks emits one BlockStored per block, not per run",
        (Patch(BP, "BlockPool.cache_full_blocks", "if block_mask is None:",
               "if False:  # VARIANT: every call takes the checked path"),
         Patch(BP, "BlockPool.cache_full_blocks", "if events and index != prev_index + 1:",
               "if events:  # VARIANT: one BlockStored per block"),),
        (ops.Req(_TOKENS), ops.GetNew(2), ops.CacheFull(0, (1, 2), 0, 2, 0), ops.TakeEvents()),
        ([2], [1, 1])),
)


def observe(variant: Variant | None, program_of: Variant) -> object:
    """Run ``program_of``'s program on ``variant`` (the bundled pool for ``None``), judged by
    the model as it goes; the last step's result: a lookup's block ids, or the number of
    hashes of each event taken."""
    target = bundled_pool() if variant is None else \
        patched_bundled_pool(variant.name, variant.patches)
    executor = run_program(target, CONFIG, program_of.program[:-1])
    result: Any = executor.step(program_of.program[-1])
    if isinstance(program_of.program[-1], ops.TakeEvents):
        return [len(event.block_hashes) for event in result]
    return list(result)
