"""vLLM v1's invariants (``BlockPool`` and ``KVCacheManager``): the core's universal ones, plus
the pool's and the manager's, in their words.

Each names the wrong output or wrong metric it prevents in ``docs/CONTRACT.md``.
"""

from __future__ import annotations

from models.core.invariants import Invariant, Invariants


class Family(Invariants):
    """The v1 family's invariant set (``Family.RC``, ``for inv in Family``)."""

    RC = Invariant("RC", "each block's ref_cnt equals the holders the caller gave it, never "
                         "below zero")
    LEAK = Invariant("LEAK", "every block is free, held or the null block, exactly once")
    FREE = Invariant("FREE", "get_num_free_blocks counts the free queue; allocating past it "
                             "raises ValueError")
    CACHE = Invariant("CACHE", "the cache map, its events and the free queue agree; a reused "
                               "block forgets its key")
    CONTENT = Invariant("CONTENT", "a hit hands a request blocks holding exactly its own "
                                   "tokens' KV")
    HASH = Invariant("HASH", "requests that differ in any input of a block key never share a "
                             "block")
    LRU = Invariant("LRU", "free blocks are handed out in the queue's order: evictions take the "
                           "least recently freed")
    COMPUTED = Invariant("COMPUTED", "a hit skips only tokens whose KV was computed, aligned, "
                                     "and never the last token")
    HIT = Invariant("HIT", "equal prefixes get equal keys and the hit counters count each "
                           "query once")
    TABLE = Invariant("TABLE", "each request's table holds one block per position of every "
                               "group")
