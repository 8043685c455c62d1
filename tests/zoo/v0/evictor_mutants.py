"""Broken eviction order and evictor contracts: patches of ``LRUEvictor``
(``prefixcache/evictor.py``), each change marked ``# BUG`` in the patched source.
"""

from __future__ import annotations

from tests.zoo.patching import Patch


def _lru(method: str, find: str, replace: str) -> tuple[Patch, ...]:
    return (Patch("evictor", f"LRUEvictor.{method}", find, replace),)


#: Assumes candidates arrive in last-access order, so the first one added is evicted.
ARRIVAL_ORDER = _lru(
    "evict", "heap = self._heap",
    "block_id = next(iter(free_table))  # BUG: was the smallest key (least recently used)\n"
    "meta = free_table.pop(block_id)\n"
    "self._maybe_compact()\n"
    "return block_id, meta.content_hash\n"
    "heap = self._heap")

#: The tie rule ignores the hashed-token count: equal times go to the earliest added.
DEPTH_BLIND = _lru("add", "time_field = _time_field(last_accessed)",
                   "num_hashed_tokens = 0  # BUG: the depth is dropped\n"
                   "time_field = _time_field(last_accessed)")

# --------------------------------------------------------------------------- evictor level
# Bugs in the evictor's own contract (docs/API.md §6) that allocator-level programs rarely
# or never show: only the evictor machine (``properties.families.v0.machines.evictor_level``) drives
# them.

#: Equal times go to the fewest hashed tokens (the tie rule inverted); metadata is right.
SHALLOW_TIE = _lru("add", "| (_MAX_TOKENS - num_hashed_tokens) << 128",
                   "| num_hashed_tokens << 128  # BUG: ties go to the fewest hashed tokens")

#: ``update`` assumes the clock never goes back: an older time is ignored.
FORWARD_ONLY_UPDATE = _lru("update", "key = time_field << 192 | (meta._key & _LOW_MASK)",
                           "if last_accessed < meta.last_accessed:  # BUG: older times dropped\n"
                           "    return\n"
                           "key = time_field << 192 | (meta._key & _LOW_MASK)")

#: ``remove`` does not decrement the candidate count (``num_blocks`` still counts it).
REMOVE_KEEPS_COUNT = (
    *_lru("remove", "del self.free_table[block_id]",
          "del self.free_table[block_id]\n"
          "self._removed = getattr(self, '_removed', 0) + 1  # BUG: still counted"),
    *_lru("num_blocks", "return len(self.free_table)",
          "return len(self.free_table) + getattr(self, '_removed', 0)"),
)

#: ``remove`` of a non-candidate is silently ignored (docs/API.md: ``ValueError``).
LAX_REMOVE = _lru("remove",
                  'raise UnknownBlockIdError(f"block {block_id} is not an eviction candidate")',
                  "return  # BUG: absent ids pass without an error")
